"""The dashboard's "why is it slow?" line: after a reply whose decode or prefill ran under 0.7× what the speed
model predicts for this load, the most likely cause from the evidence the engine recorded during the reply
(`app.core.predict.reply_check`, `app.core.metrics.slowness`). Hidden when the reply was not slow.

The model's header and this machine's stored rates (for the load's thread count) are read off the GUI thread
when a model loads; each reply is then two predictions.

On its own the line follows the engine's replies. In the window (`follows_engine` False) it is about the chat
on screen: the window shows it for a reply that ends there (`show_for`), and a chat shown anew or a reply
that ends in a chat not on screen hides it, so an empty chat never explains another chat's reply.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QWidget

from app.engine import protocol as P
from app.ui.toolkit import theme
from app.ui.toolkit.background import run_in_background


def _prepare(loaded: P.Loaded) -> tuple[Any, Any, Any]:
    from app.core.predict.reply_check import for_load

    return for_load(loaded.model_path, loaded.n_ctx, loaded.type_k, loaded.type_v, loaded.flash_attn,
                    loaded.n_gpu_layers, loaded.swa_full, loaded.n_threads)


class SlowLine(QLabel):
    def __init__(self, engine: Any, parent: QWidget | None = None):
        super().__init__("", parent)
        self.setWordWrap(True)
        self.restyle()
        self.setToolTip("Measured well under the speed model's prediction for this load: the most likely cause, "
                        "from what the machine did during the reply")
        self.setVisible(False)
        self._model: tuple[Any, Any, Any] | None = None
        self._for: str | None = None
        self.follows_engine = True  # False: the window calls show_for for the replies of the chat on screen
        engine.loaded.connect(self.on_loaded)
        engine.done.connect(self.on_done)

    def restyle(self) -> None:
        """In the theme's amber: a hint, not an error, readable in the light and the dark theme."""
        self.setStyleSheet(f"color: {theme.colors().caution};")

    def on_loaded(self, loaded: P.Loaded) -> None:
        self._model, self._for = None, loaded.model_path
        self.show_line("")

        def ready(result: tuple[Any, Any, Any]) -> None:
            if self._for == loaded.model_path:
                self._model = result

        run_in_background(self, lambda: _prepare(loaded), ready, lambda _exc: None, name="slow-line")

    def on_done(self, done: P.Done) -> None:
        if self.follows_engine:
            self.show_for(done.metrics)

    def show_for(self, metrics: dict[str, Any] | None) -> None:
        """The line for a reply that just ended (its metrics as the engine sent them, evidence included)."""
        if self._model is None or not metrics:
            self.show_line("")
            return
        from app.core.predict.reply_check import slow_reply_line

        info, rates, cfg = self._model
        self.show_line(slow_reply_line(info, rates, cfg, metrics))

    def show_line(self, line: str) -> None:
        self.setText(f"Why slow? {line}" if line else "")
        self.setVisible(bool(line))
