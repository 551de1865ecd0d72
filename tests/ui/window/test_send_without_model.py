"""After Eject, a message cannot be sent, and the window says why (QA, item E2): Enter or Send used to do
nothing visible (the hint beside the buttons had 1 px of room), with Send enabled. Now Send is disabled with
the reason as its tooltip, Enter keeps the typed text and the banner says how to get a model; the next load
takes the banner down."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.engine import protocol as P
from fake_engine import loaded_event

pytestmark = pytest.mark.gui

NO_MODEL = "No model is loaded: choose one in the toolbar, or press Reload (Ctrl+R) to load fake-Q4_K_M.gguf again."


def generates(win) -> list[P.Generate]:
    return [c for c in win.engine.client.sent if isinstance(c, P.Generate)]


def test_enter_after_eject_says_why_and_keeps_the_text(win, qtbot) -> None:
    assert win.send_button.isEnabled() and win.send_button.toolTip() == ""
    assert win.model_manager.eject()
    assert not win.send_button.isEnabled()
    assert win.send_button.toolTip() == NO_MODEL
    win.input.setFocus()
    qtbot.waitUntil(win.input.hasFocus)
    win.input.setPlainText("are you there?")
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    assert generates(win) == [] and win.input.toPlainText() == "are you there?"
    assert win.banner.isVisible() and win.banner.text() == NO_MODEL
    assert win.hint_label.text() == "Not sent: no model is loaded."
    win.model_manager.reload()  # Reload (Ctrl+R): the same model, loading
    assert not win.send_button.isEnabled() and "still loading" in win.send_button.toolTip()
    win.engine._dispatch(loaded_event())
    assert not win.banner.isVisible()  # a model is loaded: the news is old
    assert win.send_button.isEnabled() and win.send_button.toolTip() == ""
    win.send_button.click()
    assert len(generates(win)) == 1 and win.input.toPlainText() == ""


def test_the_hint_beside_the_buttons_has_room_to_be_read(win, qtbot) -> None:
    win.resize(1400, 860)
    win.model_manager.eject()
    win.input.setPlainText("hello?")
    win.submit()
    QApplication.processEvents()
    hint = win.hint_label
    assert hint.text() == "Not sent: no model is loaded."
    room = hint.contentsRect().width()
    assert room >= hint.fontMetrics().horizontalAdvance(hint.text()), room


def test_while_the_default_model_is_prepared_send_says_it_is_loading(win) -> None:
    from app.ui.toolkit.background import BackgroundJob

    win.model_manager.eject()
    win._default_job = BackgroundJob("default-model")  # a first start assembling the default model
    win._update_buttons()
    assert not win.send_button.isEnabled() and win.send_button.toolTip() == "Not now: the model is still loading."
    win.input.setPlainText("hello?")
    win.submit()
    assert win.hint_label.text() == "Not sent: the model is still loading." and not win.banner.isVisible()
    win._default_model_failed(OSError("no room"))
    assert win.send_button.toolTip().startswith("No model is loaded")


def test_without_any_model_chosen_the_banner_does_not_offer_reload(win, qtbot) -> None:
    win.model_manager.eject()
    win.session.model_path = None
    win.model_manager.update_actions()
    win.input.setPlainText("hello?")
    win.submit()
    assert win.banner.text() == "No model is loaded: choose one in the toolbar."
