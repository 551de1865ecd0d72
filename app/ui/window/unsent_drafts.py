"""The message box's drafts: one per conversation (switching chats and back brings it back, and so does a
restart), and the draft set aside while an earlier message is being edited (Esc brings it back).

A helper QObject rather than part of the window's mixins: it owns a timer and a connection of its own.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QPlainTextEdit

from app.core.chat.unsent import DraftBook, drafts_path

SAVE_AFTER_MS = 800  # typing pauses this long before the drafts file is written


class ChatDrafts(QObject):
    def __init__(self, input_box: QPlainTextEdit, store_path: str, parent: QObject | None = None):
        super().__init__(parent)
        self.input = input_box
        self.book = DraftBook(drafts_path(store_path))
        self.shown: int | None = None  # the conversation whose draft the box holds
        self._stash: str | None = None  # the draft set aside while a message is edited
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_AFTER_MS)
        self._save_timer.timeout.connect(self.save)
        input_box.textChanged.connect(self._typed)

    @property
    def editing(self) -> bool:
        return self._stash is not None

    def draft(self) -> str:
        """The shown conversation's draft (not the text of a message being edited)."""
        return self._stash if self._stash is not None else self.input.toPlainText()

    def switch_to(self, conversation_id: int | None) -> None:
        """Another conversation is shown: keep the box's draft for the one before, show this one's."""
        self.end_edit()
        if self.shown is not None:
            self.book.put(self.shown, self.input.toPlainText())
        self.shown = conversation_id
        self._set_text(self.book.get(conversation_id) if conversation_id is not None else "")
        self._save_timer.start()

    def begin_edit(self, text: str) -> None:
        """The box shows an earlier message to edit; the draft waits aside (only the first of several)."""
        if self._stash is None:
            self._stash = self.input.toPlainText()
        self._set_text(text)

    def end_edit(self) -> None:
        """Editing ended (Esc, or the edited message was sent): the draft comes back."""
        if self._stash is not None:
            text, self._stash = self._stash, None
            self._set_text(text)

    def sent(self) -> None:
        """The box's text was sent: it is no longer a draft."""
        self.input.clear()
        if self.shown is not None:
            self.book.forget(self.shown)
            self._save_timer.start()

    def forget(self, conversation_id: int) -> None:
        """The conversation was deleted: so is its draft."""
        self.book.forget(conversation_id)
        if self.shown == conversation_id:
            self.shown = None
        self._save_timer.start()

    def save(self) -> None:
        self._save_timer.stop()
        if self.shown is not None:
            self.book.put(self.shown, self.draft())
        self.book.save()

    def _typed(self) -> None:
        if self._stash is None and self.shown is not None:
            self._save_timer.start()

    def _set_text(self, text: str) -> None:
        self.input.setPlainText(text)
        self.input.moveCursor(QTextCursor.MoveOperation.End)
