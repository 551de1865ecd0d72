"""The trash of deleted chats: restore one, empty the rest."""

from __future__ import annotations

import pytest

from app.core.chat.store import ChatStore

pytestmark = pytest.mark.gui


def test_trash_view_restores_and_empties(qtbot, monkeypatch) -> None:
    from PySide6.QtWidgets import QDialog

    from app.core.chat import trash as chat_trash
    from app.ui.chat.conversation_list import ConversationPanel
    from app.ui.chat.trash_dialog import TrashDialog

    store = ChatStore()
    for title in ("One", "Two"):
        store.create_conversation(title)
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    for _ in range(2):
        panel.view.setCurrentIndex(panel.model.index(0))
        panel.delete_current()
    panel._undo_timer.timeout.emit()  # the Undo offer ran out: the trash still has both
    panel.undo_delete()
    assert store.list_conversations() == []

    def use(dialog: TrashDialog) -> int:
        assert [dialog.list.item(i).text().split(" · ", 1)[1] for i in range(dialog.list.count())] == ["One", "Two"]
        dialog.list.setCurrentRow(1)  # as a click on it: it alone is selected (the dialog opened on the first)
        dialog.restore_button.click()
        assert dialog.list.count() == 1
        dialog.empty_button.click()
        assert dialog.list.count() == 0 and not dialog.empty_label.isHidden()
        return int(QDialog.DialogCode.Rejected.value)

    monkeypatch.setattr(TrashDialog, "exec", use)
    panel.trash_button.click()
    assert [c.title for c in store.list_conversations()] == ["Two"]
    assert chat_trash.trashed(store) == []
