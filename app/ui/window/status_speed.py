"""The reply's speed in the status bar (TTFT and decode tok/s, live while it streams, final when it ends),
shown while the dashboard is hidden: the two numbers people watch should not need the whole dashboard. It is
the "speed" part of the status line (app.ui.window.status_line)."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QDockWidget

from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics
from app.ui.chat.session import ChatSession
from app.ui.window.status_line import StatusLine

REFRESH_MS = 250  # live numbers 4×/s, as the dashboard's cards
TIP = "Time to first token and decode rate of the latest reply (the dashboard has the rest)"


class StatusSpeed(QObject):
    """The status line's "TTFT 52 ms · decode 61.5 tok/s" for the latest reply of the chat shown."""

    def __init__(self, session: ChatSession, dock: QDockWidget, line: StatusLine):
        super().__init__(line)
        self._line = line
        self._text = ""
        self._dock = dock
        self._started: float | None = None  # this reply's request, on the engine's monotonic clock
        self._times: list[float] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._show_live)
        session.message_added.connect(self._message_added)
        session.tokens_timed.connect(self._tokens)
        session.message_finished.connect(self._finished)
        session.conversation_changed.connect(lambda _cid: self._show_last(session))
        dock.visibilityChanged.connect(lambda _visible: self._follow_dock())
        self._follow_dock()

    def text(self) -> str:
        """What the part says while the dashboard is hidden."""
        return self._text

    def shown(self) -> bool:
        return not self._dock.isVisible()

    def _say(self, text: str) -> None:
        self._text = text
        self._follow_dock()

    def _follow_dock(self) -> None:
        self._line.set_part("speed", self._text if self.shown() else "", TIP)

    def _message_added(self, message: Message) -> None:
        if message.role == "assistant" and message.state == "streaming":
            self._started = time.monotonic()
            self._times = []
            self._say("TTFT … · waiting for token 1")

    def _tokens(self, times: list[float]) -> None:
        self._times.extend(times)
        if not self._timer.isActive():
            self._timer.start()

    def _show_live(self) -> None:
        t = self._times
        if not t or self._started is None:
            return
        text = f"TTFT {1000 * (t[0] - self._started):.0f} ms"
        if len(t) >= 2 and t[-1] > t[0]:
            text += f" · decode {(len(t) - 1) / (t[-1] - t[0]):.1f} tok/s (live)"
        self._say(text)

    def _finished(self, message: Message) -> None:
        self._timer.stop()
        self._started = None
        self.show_metrics(PhaseMetrics.from_dict(message.metrics) if message.metrics else None)

    def _show_last(self, session: ChatSession) -> None:
        conv = session.conversation
        replies = [m for m in session.store.messages(conv.id) if m.metrics] if conv is not None else []
        self.show_metrics(PhaseMetrics.from_dict(replies[-1].metrics or {}) if replies else None)

    def show_metrics(self, m: PhaseMetrics | None) -> None:
        if m is None:
            self._say("")
            return
        text = f"TTFT {m.ttft_ms:.0f} ms"
        if m.decode_tps == m.decode_tps and m.decode_tps > 0:  # (NaN when the reply had one token)
            text += f" · decode {m.decode_tps:.1f} tok/s"
        self._say(text)
