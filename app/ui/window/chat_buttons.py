"""The row under the chat's input (Send, Stop, Regenerate and Continue, then the hint that says why a message
was not sent), the note above the input while another chat's reply holds Send, and Esc, the Stop button's key,
as a shortcut of the whole window.

Esc was the input box's own key: with the focus anywhere else (the chat list, the dashboard, or a button just
clicked: Continue and Regenerate hand the focus on when the reply they start disables them) it stopped nothing.
The window's shortcut is enabled only while the chat on screen has a reply being written (app.ui.window.chat_flow
keeps it in step with Stop): then Esc stops it from anywhere in the window; at other times Esc is left to
whatever has the focus (the input box cancels an Edit with it), and a dialog or a menu, windows of their own,
keep theirs, as does a field that takes Esc itself (a chat's title being renamed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy

from app.ui.toolkit.focus_frame import FocusRingButton
from app.ui.toolkit.safe_text import make_plain

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


def build_button_row(win: MainWindow) -> QHBoxLayout:
    """Send, Stop, Regenerate and Continue, then the hint; the window's Esc shortcut."""
    buttons = QHBoxLayout()
    # Fusion draws the default button (Send) the same with the focus as without it: all four draw a focus ring
    win.send_button = FocusRingButton("Send")
    win.send_button.setDefault(True)
    win.send_button.clicked.connect(win.submit)
    win.stop_button = FocusRingButton("Stop")
    win.stop_button.setToolTip("Stop the reply (Esc)")
    win.stop_button.clicked.connect(win.session.stop)
    win.regen_button = FocusRingButton("Regenerate")
    win.regen_button.setToolTip("Replace the last reply with a new one")
    win.regen_button.clicked.connect(win.regenerate)
    win.continue_button = FocusRingButton("Continue")
    win.continue_button.setToolTip("Continue the interrupted reply")
    win.continue_button.clicked.connect(win.continue_reply)
    for b in (win.send_button, win.stop_button, win.regen_button, win.continue_button):
        # The style's 80 px minimum is for roomy dialogs: in a small window the buttons may shrink to their text.
        b.setMinimumWidth(b.fontMetrics().horizontalAdvance(b.text()) + 16)
        buttons.addWidget(b)
    win.hint_label = QLabel("")
    # The hint takes the rest of the row (beside a stretch it was given 1 px, and no hint was ever seen); a long
    # one is cut there, never the buttons.
    win.hint_label.setMinimumWidth(1)
    win.hint_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    win.hint_label.setContentsMargins(6, 0, 0, 0)
    buttons.addWidget(win.hint_label, 1)
    win.stop_shortcut = QShortcut(QKeySequence(Qt.Key.Key_Escape), win)  # the window's: Qt.WindowShortcut
    win.stop_shortcut.setEnabled(False)  # until a reply is written in the chat on screen
    win.stop_shortcut.activated.connect(win.escape)
    return buttons


def busy_note() -> QLabel:
    """The note above the input while a reply in another chat holds Send (its text: chat_flow)."""
    note = QLabel("")
    make_plain(note)  # it names a chat, whose title is message text
    note.setWordWrap(True)
    note.hide()
    return note
