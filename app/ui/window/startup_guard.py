"""A chat that took the window down while it was being opened is not reopened at the next start.

Stored text can hit a bug below Python (a Qt layout or rendering crash) that no `try` catches; if the window
reopened that chat at every start, the user would be locked out. So a marker file naming the conversation is
written before a chat is opened and removed once it has been on screen for a moment (or the window closes
normally). A marker found at start means the last run died while opening that chat: the window starts on an
empty chat, says why, and shows that conversation as plain text when the user opens it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from app.core.files import atomic_write

SETTLE_MS = 1500  # long enough for the first layout, paint and resize after opening


class OpeningGuard(QObject):
    def __init__(self, store_path: Path, parent: QObject | None = None):
        super().__init__(parent)
        name = store_path.name if str(store_path) != ":memory:" else ""
        self.path: Path | None = store_path.with_name(name + ".opening") if name else None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self.clear)

    def left_over(self) -> int | None:
        """The conversation the last run was opening when it died, or None."""
        if self.path is None:
            return None
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        try:
            return int(text)
        except ValueError:
            return 0  # an unreadable marker still means "do not reopen anything"

    def opening(self, conversation_id: int) -> None:
        """Call before a conversation is rendered; the marker clears itself once it has been shown."""
        if self.path is None:
            return
        try:
            atomic_write.write_text(self.path, str(conversation_id))
        except OSError:
            return  # a read-only data folder: no guard, but no reason to refuse opening the chat
        self._timer.start()

    def clear(self) -> None:
        self._timer.stop()
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass
