"""Deleting the open chat in the window: the next chat opens, Undo brings the deleted one back on screen; once
the chat has left the trash from the Trash view (restored, or removed for good), its Undo bar goes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from app.core.chat.store import ChatStore
from app.ui.chat.trash_dialog import TrashDialog
from fake_window import make_window

pytestmark = pytest.mark.gui


def test_undo_reopens_the_deleted_chat(qtbot, tmp_path: Path) -> None:

    store = ChatStore(tmp_path / "chats.sqlite3")
    older = store.create_conversation("Older")
    store.add_message(older.id, "user", "old text")
    doomed = store.create_conversation("Doomed")
    store.add_message(doomed.id, "user", "keep me")
    win = make_window(qtbot, store=store)
    try:
        assert win.session.conversation is not None and win.session.conversation.id == doomed.id
        win.conversations.select(doomed.id)
        win.conversations.delete_current()
        assert win.session.conversation is not None and win.session.conversation.id == older.id
        win.conversations.undo_button.click()
        assert win.session.conversation is not None and win.session.conversation.id == doomed.id
        shown = [win.message_view.widget_for(i).text for i in win.message_view.message_ids()]
        assert shown == ["keep me"]
        assert win.conversations.view.currentIndex().data() == "Doomed"
    finally:
        win.close()
        store.close()


def in_trash_dialog(qtbot, act: Callable[[TrashDialog], None]) -> None:
    """`act` on the Trash dialog once it is open (it is modal: File ▸ Trash… returns when it closes)."""

    def when_open() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, TrashDialog)
        try:
            act(dialog)
        finally:
            dialog.close()

    QTimer.singleShot(0, when_open)


def delete_with_the_key(win, qtbot, conversation_id: int) -> None:
    """Select the chat in the list and press Delete, as a user does."""
    win.conversations.select(conversation_id)
    win.conversations.view.setFocus()
    qtbot.waitUntil(win.conversations.view.hasFocus)
    qtbot.keyClick(win.conversations.view, Qt.Key.Key_Delete)


@pytest.fixture
def doomed_chat(window, qtbot) -> int:
    """A chat deleted a moment ago: its Undo bar is showing."""
    window.store.create_conversation("Older")
    doomed = window.store.create_conversation("Doomed")
    window.conversations.reload()
    delete_with_the_key(window, qtbot, doomed.id)
    assert window.conversations.undo_bar.isVisible()
    return doomed.id


def test_restoring_from_the_trash_withdraws_the_undo_bar(window, qtbot, doomed_chat: int) -> None:
    def restore(dialog: TrashDialog) -> None:
        dialog.list.item(0).setSelected(True)
        dialog.restore_button.click()

    in_trash_dialog(qtbot, restore)
    window.menus.trash.trigger()  # File ▸ Trash…
    panel = window.conversations
    assert panel.undo_bar.isHidden()  # its Undo would undo nothing
    titles = [panel.model.index(row).data() for row in range(panel.model.rowCount())]
    assert titles.count("Doomed") == 1
    window.activateWindow()  # back from the dialog
    panel.view.setFocus()
    qtbot.waitUntil(panel.view.hasFocus)
    qtbot.keyClick(panel.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # Ctrl+Z: nothing left to undo
    assert [panel.model.index(row).data() for row in range(panel.model.rowCount())] == titles
    assert window.session.conversation is not None and window.session.conversation.id == doomed_chat


def test_emptying_the_trash_withdraws_the_undo_bar(window, qtbot, doomed_chat: int) -> None:
    in_trash_dialog(qtbot, lambda dialog: dialog.empty_button.click())
    window.menus.trash.trigger()  # File ▸ Trash…
    panel = window.conversations
    assert panel.undo_bar.isHidden()  # the chat is gone for good: Undo cannot bring it back
    assert [panel.model.index(row).data() for row in range(panel.model.rowCount())] == ["Older"]
