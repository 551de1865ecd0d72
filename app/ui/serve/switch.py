"""The window's Serve switch: a checkable toolbar button, a status-bar line, and the news in the banner.

On: `roofline serve` starts on the chat's loaded model (app.ui.serve.control owns the process); the status bar
shows its URL and the requests in flight, the dashboard shows its traffic. Off, or the window closing: the
server stops. A server that ends on its own says so in the banner and the switch goes off.

The chat engine stays loaded while serving. The weights are a read-only mapping of the same file, shared by
the OS between the two processes, so the server's extra memory is mostly its KV cache and compute buffers
(the tooltip gives the estimate); keeping the chat model means no reload when serving stops, and chat and
served requests can be compared side by side. When the estimate is over the memory available now, the
banner warns before the server starts (it still starts: the OS may page the shared weights out of both).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QToolBar

from app.core.metrics.phase import fmt_bytes
from app.core.metrics.serve_traffic import Traffic
from app.ui.serve.control import ServeControl, extra_memory
from app.ui.toolkit.background import run_in_background

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

BASE_TIP = ("Serve the loaded model to other apps over an OpenAI-compatible API (roofline serve: "
            "continuous batching, loopback only). The server loads its own copy of the model")


def available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except (ImportError, OSError):
        return None


class ServeSwitch:
    """Owns the window's ServeControl and shows what it does."""

    def __init__(self, window: MainWindow, toolbar: QToolBar, control: ServeControl | None = None) -> None:
        self.window = window
        self.control = control or ServeControl(window, threads=window.settings.threads)
        self.action = QAction("Serve", window)
        self.action.setCheckable(True)
        self.action.setToolTip(BASE_TIP + ".")
        self.action.toggled.connect(self._toggled)
        toolbar.addAction(self.action)
        self.line = window.status_line  # its "serve" part: the URL and the requests in flight
        self.extra: int | None = None
        self.extra_for: str | None = None
        c = self.control
        c.state_changed.connect(self._state)
        c.url_changed.connect(window.dashboard.server_traffic.set_url)
        c.traffic.connect(self._traffic)
        c.traffic.connect(window.dashboard.server_traffic.on_traffic)
        c.died.connect(self._died)
        window.engine.loaded.connect(lambda _loaded: self.estimate())

    # ------------------------------------------------------------------ memory
    def estimate(self) -> None:
        """Estimate the server's extra memory for the chat's model (off the GUI thread) into the tooltip."""
        path = self.window.session.model_path
        if not path or path == self.extra_for:
            return
        ctx, parallel = self.control.ctx, self.control.parallel

        def done(extra: int | None) -> None:
            self.extra, self.extra_for = extra, path
            tip = BASE_TIP
            if extra is not None:
                tip += (f": about {fmt_bytes(extra)} more memory (its KV cache for {ctx:,} tokens in {parallel} "
                        "slots and compute buffers; the weights' mapping of the file is shared with the chat "
                        "engine's)")
            self.action.setToolTip(tip + ". The chat model stays loaded.")

        run_in_background(self.window, lambda: extra_memory(Path(path), ctx, parallel), done, name="serve-memory")

    # ------------------------------------------------------------------ switch
    def _toggled(self, on: bool) -> None:
        if not on:
            self.control.stop()
            return
        if self.control.running:
            return
        path = self.window.session.model_path
        if not path:
            self._refuse("Load a model first: the server serves the chat's model.")
            return
        problem = self.control.start(Path(path))
        if problem:
            self._refuse(problem)
            return
        free = available_memory()
        if self.extra is not None and self.extra_for == path and free is not None and self.extra > free:
            self.window.banner.show_message(
                f"Serving needs about {fmt_bytes(self.extra)} more memory and {fmt_bytes(free)} is available: "
                "the machine may slow down. Stop the server with the Serve switch.", info=True)

    def _refuse(self, why: str) -> None:
        self.window.banner.show_message(why)
        self.action.blockSignals(True)
        self.action.setChecked(False)
        self.action.blockSignals(False)

    def _state(self, state: str) -> None:
        self.action.blockSignals(True)
        self.action.setChecked(state != "stopped")
        self.action.blockSignals(False)
        if state == "starting":
            self.line.set_part("serve", "serve: starting…")
        elif state == "stopped":
            self.line.set_part("serve", "")
        else:
            self.line.set_part("serve", f"serving {self.control.url} · 0 in flight")

    def _traffic(self, t: Traffic) -> None:
        if self.control.url:
            waiting = f" ({t.deferred} waiting)" if t.deferred else ""
            self.line.set_part("serve", f"serving {self.control.url} · {t.in_flight} in flight{waiting}")

    def _died(self, why: str) -> None:
        self.window.banner.show_message(why)

    def stop(self) -> None:
        self.control.stop()
