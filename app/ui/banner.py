"""The window's banner: one line of bad news with an optional action; repeated news replaces, never stacks.

Its text often comes from outside (an engine or server error, a template's exception, a file path), so it
is always plain text.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QWidget

from app.ui import theme
from app.ui.safe_text import plain_label, set_plain_tooltip


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
        self.restyle()
        self.hide()

    def restyle(self) -> None:
        c = theme.colors()
        self.setStyleSheet(f"QFrame#banner {{ background: {c.banner_bg}; border-radius: 6px; }}"
                           f"QFrame#banner QLabel {{ color: {c.banner_fg}; }}")

    def show_message(self, text: str, restart: bool = False, details: str = "") -> None:
        """Show `text` (plain); `details` (e.g. the engine's last log lines) become the tooltip."""
        self.label.setText(text)
        set_plain_tooltip(self.label, details)
        self.restart_button.setVisible(restart)
        self.show()
