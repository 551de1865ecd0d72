"""Esc stops the reply being written wherever the focus is in the window (QA, item E1): it was the message box's
key alone, so after a click in the chat list or the dashboard, or on Continue or Regenerate (whose focus then
went on to the dashboard), Esc stopped nothing. Esc's other uses stay: a chat title being renamed takes it,
and with no reply being written it is left to whatever has the focus (the message box cancels an Edit)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit, QWidget

from app.engine import protocol as P
from chat_drive import done, request_of, send, tokens

pytestmark = pytest.mark.gui


@pytest.fixture
def active(win, qtbot):
    """The chat tests' window, active (a window's shortcuts work only in the active window, as on a desktop)."""
    win.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win)
    return win


def cancels(win) -> list[P.Cancel]:
    return [c for c in win.engine.client.sent if isinstance(c, P.Cancel)]


def press_esc_in(widget: QWidget, qtbot) -> None:
    widget.setFocus(Qt.FocusReason.MouseFocusReason)
    qtbot.waitUntil(widget.hasFocus)
    qtbot.keyClick(widget, Qt.Key.Key_Escape)


@pytest.mark.parametrize("where", ["chat list", "dashboard", "chat search", "sampling"])
def test_esc_stops_the_reply_from_anywhere_in_the_window(active, qtbot, where: str) -> None:
    win = active
    rid = send(win, "tell me a story")
    tokens(win, rid, "Once")
    widget = {"chat list": win.conversations.view, "dashboard": win.dock.widget(),
              "chat search": win.conversations.search, "sampling": win.sampling_panel.temperature}[where]
    press_esc_in(widget, qtbot)
    assert [c.request_id for c in cancels(win)] == [rid]


def test_esc_after_clicking_continue_stops_the_continued_reply(active, qtbot) -> None:
    win = active
    rid = send(win, "tell me a story")
    done(win, rid, "length")  # Max tokens: Continue is offered
    assert win.continue_button.isVisible()
    qtbot.mouseClick(win.continue_button, Qt.MouseButton.LeftButton)
    continued = request_of(win)
    assert continued != rid and win.session.busy
    assert win.input.hasFocus()  # not the dashboard's: the reply disabled the button that had it
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Escape)
    assert [c.request_id for c in cancels(win)] == [continued]


def test_esc_in_a_title_being_renamed_cancels_the_rename_not_the_reply(active, qtbot) -> None:
    win = active
    rid = send(win, "tell me a story")
    tokens(win, rid, "Once")
    panel = win.conversations
    panel.view.setFocus()
    panel.rename_current()
    editor = panel.view.findChild(QLineEdit)
    assert editor is not None
    qtbot.waitUntil(editor.hasFocus)
    editor.setText("a new title")
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    assert cancels(win) == [] and win.session.busy  # the reply goes on
    qtbot.waitUntil(lambda: panel.view.findChild(QLineEdit) is None or not panel.view.findChild(QLineEdit).isVisible())
    assert panel.view.currentIndex().data() != "a new title"
    qtbot.keyClick(panel.view, Qt.Key.Key_Escape)  # a second Esc, in the list: now the reply stops
    assert [c.request_id for c in cancels(win)] == [rid]


def test_esc_leaves_a_reply_in_another_chat_to_its_stop_button(active, qtbot) -> None:
    win = active
    rid = send(win, "tell me a story")
    win.new_chat()  # the reply goes on in the background
    press_esc_in(win.conversations.view, qtbot)
    assert cancels(win) == [] and win.session.busy
    win.stop_button.click()  # Stop ends it (the note above the input says so)
    assert [c.request_id for c in cancels(win)] == [rid]


def test_esc_without_a_reply_is_left_to_the_message_box(active, qtbot) -> None:
    win = active
    rid = send(win, "first question")
    done(win, rid)
    assert not win.stop_shortcut.isEnabled()
    user = win.store.messages(win.session.conversation.id)[0]
    win.input.setPlainText("my draft")
    win.begin_edit(user.id)
    press_esc_in(win.input, qtbot)
    assert win.input.toPlainText() == "my draft" and not win.edit_label.isVisibleTo(win)
