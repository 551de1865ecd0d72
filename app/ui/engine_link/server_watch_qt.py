"""The window's poller of a remote server's own metrics: every POLL_MS, one poll as background work
(app.engine.remote.server_metrics: bounded in bytes and time, on its own connection), never two at once, so
a slow or hostile /metrics costs the chat nothing. `measures` carries each ServerMeasures, `failed` the one
line of a poll that could not be read (the next poll tries again)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.remote.server_metrics import MetricsSource, MetricsUnavailable
from app.ui.toolkit.background import run_in_background

POLL_MS = 2000


class ServerWatchQt(QObject):
    measures = Signal(object)  # app.core.remote.measures.ServerMeasures
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.source: MetricsSource | None = None
        self._busy = False
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.poll)

    def follow(self, client: Any, engine: str | None = None) -> bool:
        """Poll the server behind `client` (a started RemoteClient); False for anything else (a local engine)."""
        self.stop()
        if not callable(getattr(client, "url_for", None)):
            return False
        try:
            self.source = MetricsSource(client, engine)
        except MetricsUnavailable as exc:
            self.failed.emit(str(exc))
            return False
        self._timer.start()
        self.poll()
        return True

    def stop(self) -> None:
        self._timer.stop()
        self.source = None  # a poll in flight finds no source when it ends: its result is dropped

    def poll(self) -> None:
        source = self.source
        if source is None or self._busy:
            return
        self._busy = True

        def done(m: Any) -> None:
            self._busy = False
            if source is self.source:
                self.measures.emit(m)

        def failed(exc: BaseException) -> None:
            self._busy = False
            if source is self.source:
                self.failed.emit(str(exc) if isinstance(exc, MetricsUnavailable) else
                                 f"the server's metrics could not be read: {type(exc).__name__}")

        run_in_background(self, source.poll, done, failed, name="server-metrics")
