"""Switching chats in a small window lays the newly shown chat out at the width it is shown at, at once: a
long chat opened after a short one (the scroll bar appears) or a short one after a long one (it goes) has no
message cut at the right, nor left narrower than the chat, once the click's events are processed, not only
after a later resize."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication

from app.core.chat.store import ChatStore
from fake_window import make_window

pytestmark = pytest.mark.gui

PARAGRAPH = ("Prefill evaluates the whole prompt in large batches and is bound by compute, while decode produces "
             "one token at a time and is bound by memory bandwidth. ") * 3


@pytest.fixture
def chats(qtbot, tmp_path: Path):
    """An 800 px window with a short chat shown and a long one (taller than the view) in the list."""
    store = ChatStore(tmp_path / "chats.sqlite3")
    long_chat = store.create_conversation("A long chat")
    for _ in range(6):
        store.add_message(long_chat.id, "user", PARAGRAPH)
        store.add_message(long_chat.id, "assistant", PARAGRAPH)
    short_chat = store.create_conversation("A short chat")
    store.add_message(short_chat.id, "user", "Hello")
    store.add_message(short_chat.id, "assistant", "Hi.")
    win = make_window(qtbot, store=store)
    win.resize(800, 600)
    win.show()
    qtbot.waitExposed(win)
    click_chat(win, qtbot, short_chat.id)
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(50)
    yield win, short_chat.id, long_chat.id
    win.close()
    store.close()


def click_chat(win, qtbot, conversation_id: int) -> None:  # type: ignore[no-untyped-def]
    view = win.conversations.view
    index = win.conversations.model.index(win.conversations.model.row_of(conversation_id))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(index).center())
    assert win.session.conversation.id == conversation_id


def assert_laid_out_at_the_shown_width(win) -> None:  # type: ignore[no-untyped-def]
    view = win.message_view
    viewport = view.viewport().width()
    inner = view.widget()
    margins = inner.layout().contentsMargins()
    assert inner.width() == viewport, "the chat is laid out at another width than it is shown at"
    for message_id in view.message_ids():
        bubble = view.widget_for(message_id)
        left = bubble.mapTo(view.viewport(), QPoint(0, 0)).x()
        assert left + bubble.width() <= viewport - margins.right(), f"message {message_id} is cut at the right"
        assert bubble.width() == viewport - margins.left() - margins.right(), f"message {message_id}'s width"
        body = bubble.body
        assert body.height() >= body.heightForWidth(body.width()), f"message {message_id}'s text is cut"


def widths(win) -> list[int]:  # type: ignore[no-untyped-def]
    view = win.message_view
    return [view.viewport().width()] + [view.widget_for(i).width() for i in view.message_ids()]


def switch_and_check(win, qtbot, conversation_id: int) -> None:  # type: ignore[no-untyped-def]
    click_chat(win, qtbot, conversation_id)
    QApplication.processEvents()
    assert_laid_out_at_the_shown_width(win)
    at_once = widths(win)
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(50)
    assert widths(win) == at_once, "the chat was laid out again at another width after it was shown"


def test_a_long_chat_opened_after_a_short_one(chats, qtbot) -> None:
    win, _short, long_chat = chats
    switch_and_check(win, qtbot, long_chat)
    assert win.message_view.verticalScrollBar().isVisible()


def test_a_short_chat_opened_after_a_long_one(chats, qtbot) -> None:
    win, short_chat, long_chat = chats
    switch_and_check(win, qtbot, long_chat)
    switch_and_check(win, qtbot, short_chat)
    assert not win.message_view.verticalScrollBar().isVisible()
