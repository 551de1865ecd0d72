"""Long chat titles keep the sidebar as it is (issue 32, item 15): deleting one (the Delete key in the list)
does not widen the sidebar through its Undo bar, the list never scrolls sideways at 1600×1000, and the Trash
view shows every deletion date whole."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from fake_window import settle

pytestmark = pytest.mark.gui

LONG_TITLE = "A very long title about the differences between prefill and decode on a laptop CPU, explained"


def long_chats(window, n: int = 3) -> None:
    for i in range(n):
        window.store.create_conversation(f"{LONG_TITLE} ({i})")
    window.conversations.reload()


def test_deleting_a_long_titled_chat_keeps_the_sidebar_width(window, qtbot) -> None:
    window.resize(1600, 1000)
    long_chats(window)
    settle(qtbot)
    panel = window.conversations
    before = panel.width()
    panel.view.setCurrentIndex(panel.model.index(0))
    panel.view.setFocus()
    qtbot.keyClick(panel.view, Qt.Key.Key_Delete)
    settle(qtbot)
    assert not panel.undo_bar.isHidden()
    assert panel.width() == before
    assert LONG_TITLE in panel.undo_label.toolTip()  # the whole title on hover


def test_the_chat_list_never_scrolls_sideways(window, qtbot) -> None:
    window.resize(1600, 1000)
    long_chats(window)
    settle(qtbot)
    assert not window.conversations.view.horizontalScrollBar().isVisible()


def test_the_trash_shows_each_deletion_date(window, qtbot, monkeypatch) -> None:
    from app.ui.chat.trash_dialog import TrashDialog

    long_chats(window)
    panel = window.conversations
    for _ in range(3):
        panel.view.setCurrentIndex(panel.model.index(0))
        panel.delete_current()
    seen: list[list[str]] = []

    def look(dialog: TrashDialog) -> int:
        dialog.show()
        dialog.resize(480, 360)  # the size it opens at on a desktop
        settle(qtbot)
        shown = []
        view = dialog.list
        for i in range(view.count()):
            item = view.item(i)
            width = min(view.visualItemRect(item).width(), view.viewport().width())  # what is on screen
            shown.append(view.fontMetrics().elidedText(item.text(), view.textElideMode(), width))
        seen.append(shown)
        return 0

    monkeypatch.setattr(TrashDialog, "exec", look)
    window.menus.trash.trigger()  # File ▸ Trash…
    (shown,) = seen
    assert len(shown) == 3
    for text in shown:
        assert "deleted 20" in text and text.split("deleted ", 1)[1][:16].count(":") == 1, text  # date and time
