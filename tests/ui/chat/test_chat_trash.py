"""Deleting the open chat in the window: the next chat opens, Undo brings the deleted one back on screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.chat.store import ChatStore
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
