"""The window's banner: one line of news (bad news in the warning colours, a note in the quiet ones) with an
optional action; repeated news replaces, never stacks.

Its text often comes from outside (an engine or server error, a template's exception, a file path), so it
is always plain text. News that names the model in use ("Still using X", "Loading X again") holds only
while X is the model: `model_changed` takes it down once another model is in use.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QWidget

from app.ui.toolkit import theme
from app.ui.toolkit.safe_text import plain_label, set_plain_tooltip


class Banner(QFrame):
    restart_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("banner")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        self.label = plain_label()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.label, 1)
        self.restart_button = QPushButton("Restart engine")
        self.restart_button.clicked.connect(self.restart_requested)
        lay.addWidget(self.restart_button)
        close = QPushButton("Dismiss")
        close.clicked.connect(self.hide)
        lay.addWidget(close)
        self.info = False  # a note, not a warning: drawn like a reply, not in the warning colours
        self.while_model: str | None = None  # the model the shown news is about, if it names one
        self.restyle()
        self.hide()

    def restyle(self) -> None:
        c = theme.colors()
        bg, fg = (c.assistant_bg, c.text) if self.info else (c.banner_bg, c.banner_fg)
        self.setStyleSheet(f"QFrame#banner {{ background: {bg}; border: 1px solid {c.border}; border-radius: 6px; }}"
                           f"QFrame#banner QLabel {{ color: {fg}; }}")

    def show_message(self, text: str, restart: bool = False, details: str = "", info: bool = False,
                     while_model: str | None = None) -> None:
        """Show `text` (plain); `details` (e.g. the engine's last log lines) become the tooltip; `info`: a
        note rather than a warning; `while_model`: the text holds only while that model is the one in use."""
        self.while_model = while_model
        if info != self.info:
            self.info = info
            self.restyle()
        self.label.setText(text)
        set_plain_tooltip(self.label, details)
        self.restart_button.setVisible(restart)
        self.show()

    def model_changed(self, model_path: str) -> None:
        """`model_path` is the model in use now: news about another one is out of date."""
        if self.while_model is not None and model_path != self.while_model:
            self.while_model = None
            self.hide()
