"""The Undo bar after a delete cuts the chat's title, never what happened (QA, item E4): "“The three primary
colou…" lost the word "deleted". At the sidebar's narrowest (an 800×600 window) and at a roomy width, the bar
shows “…” deleted and the Undo button whole, the title cut to the room left."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from fake_window import settle

pytestmark = pytest.mark.gui

TITLE = "The three primary colours of light and why screens mix them additively, explained for a curious child"


@pytest.mark.parametrize("size", [(800, 600), (1400, 860)])
def test_the_undo_bar_cuts_only_the_title(window, qtbot, size: tuple[int, int]) -> None:
    window.resize(*size)
    window.store.create_conversation("Older")
    window.store.create_conversation(TITLE)
    window.conversations.reload()
    settle(qtbot)
    panel = window.conversations
    panel.view.setCurrentIndex(panel.model.index(0))
    panel.view.setFocus()
    qtbot.keyClick(panel.view, Qt.Key.Key_Delete)
    settle(qtbot)
    label, button, bar = panel.undo_label, panel.undo_button, panel.undo_bar
    assert bar.isVisible()
    shown = label.text()
    assert shown.startswith("“") and shown.endswith("” deleted"), shown
    assert "…" in shown and len(shown) < len(TITLE)  # the title is what was cut
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()  # all of it on screen
    assert button.geometry().right() < bar.width()  # the Undo button whole, its word with room around it
    assert button.width() >= button.fontMetrics().horizontalAdvance(button.text()) + 12
    assert label.geometry().right() < button.geometry().left()
    assert TITLE in label.toolTip()
