"""The chat list beside the chat: its Qt model, search, rename, delete with Undo (no dialog), and the
line that says a search found nothing."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core.chat.store import ChatStore
from app.ui.chat.conversation_list import ConversationIdRole, ConversationListModel, ConversationPanel

pytestmark = pytest.mark.gui


def _store_with(titles: list[str]) -> ChatStore:
    store = ChatStore()
    for t in titles:
        conv = store.create_conversation(t)
        store.add_message(conv.id, "user", f"about {t.lower()}")
    return store


def test_conversation_model_passes_modeltester(qtmodeltester):
    store = _store_with(["Alpha", "Beta", "Gamma"])
    model = ConversationListModel(store)
    qtmodeltester.check(model, force_py=True)  # stays connected: the changes below are checked too
    assert [model.index(r).data() for r in range(model.rowCount())] == ["Gamma", "Beta", "Alpha"]
    model.set_search("beta")
    assert model.rowCount() == 1
    assert model.setData(model.index(0), "Renamed")
    assert store.conversation(model.index(0).data(ConversationIdRole)).title == "Renamed"  # type: ignore[union-attr]
    model.set_search("")
    assert model.rowCount() == 3


def test_panel_search_rename_delete(qtbot):
    store = _store_with(["Alpha", "Beta"])
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    opened: list[int] = []
    panel.open_requested.connect(opened.append)
    qtbot.keyClicks(panel.search, "alph")
    assert panel.model.rowCount() == 1
    panel.search.clear()
    assert panel.model.rowCount() == 2
    index = panel.model.index(1)
    qtbot.mouseClick(panel.view.viewport(), Qt.MouseButton.LeftButton, pos=panel.view.visualRect(index).center())
    assert opened == [index.data(ConversationIdRole)]
    with qtbot.waitSignal(panel.deleted) as blocker:
        panel.delete_current()
    assert blocker.args == [opened[0]]
    assert [c.title for c in store.list_conversations()] == ["Beta"]


def test_deleting_a_chat_asks_nothing_and_undo_brings_it_back(qtbot, monkeypatch) -> None:
    """Delete goes to the trash at once (no dialog to press Enter through); Undo or Ctrl+Z restores it."""
    from PySide6.QtWidgets import QMessageBox

    from app.ui.chat.conversation_list import ConversationPanel

    store = ChatStore()
    store.create_conversation("Keep me")
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    monkeypatch.setattr(QMessageBox, "exec", lambda box: pytest.fail(f"asked: {box.text()}"))
    panel.view.setCurrentIndex(panel.model.index(0))
    panel.delete_current()
    assert store.list_conversations() == []
    assert not panel.undo_bar.isHidden() and panel.undo_label.text() == "“Keep me” deleted"
    with qtbot.waitSignal(panel.restored):
        panel.undo_button.click()
    assert [c.title for c in store.list_conversations()] == ["Keep me"] and panel.undo_bar.isHidden()
    panel.view.setCurrentIndex(panel.model.index(0))
    panel.delete_current()
    panel.show()
    panel.activateWindow()
    panel.view.setFocus()
    qtbot.waitUntil(panel.view.hasFocus)
    qtbot.keyClick(panel.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert [c.title for c in store.list_conversations()] == ["Keep me"]


def test_search_without_matches_says_so(qtbot) -> None:
    from app.ui.chat.conversation_list import ConversationPanel

    store = ChatStore()
    store.create_conversation("Alpha")
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.keyClicks(panel.search, "zebra")
    assert panel.no_matches.isVisible() and "zebra" in panel.no_matches.text()
    panel.search.clear()
    assert not panel.no_matches.isVisible()
