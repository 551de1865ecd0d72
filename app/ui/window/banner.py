"""The window's banner: one line of news (bad news in the warning colours, a note in the quiet ones) with an
optional action; repeated news replaces, never stacks. Long news shows its first three lines at the window's
width, the last ending in "…", and **More** shows the rest (**Less** folds it again): in an 800×600 window a
note of a few sentences took ten lines of the chat's room.

Its text often comes from outside (an engine or server error, a template's exception, a file path), so it
is always plain text. News that names the model in use ("Still using X", "Loading X again") holds only
while X is the model: `model_changed` takes it down once another model is in use.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QToolButton, QVBoxLayout, QWidget

from app.ui.toolkit import theme
from app.ui.toolkit.capped_label import CappedLabel
from app.ui.toolkit.safe_text import set_plain_tooltip

MAX_LINES = 3  # the banner's lines until More
NO_MODEL = ""  # `while_model` of news about having no model at all: the next model loaded takes it down


class Banner(QFrame):
    restart_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("banner")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        self.label = CappedLabel(MAX_LINES)  # plain text
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.label, 1)
        # The buttons stack in a narrow column at the right: side by side they took half of an 800 px
        # window's chat column from the text, which then wrapped to a word a line.
        side = QVBoxLayout()
        side.setSpacing(2)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.setAccessibleName("Dismiss")
        close.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        close.clicked.connect(self.hide)
        side.addWidget(close, 0, Qt.AlignmentFlag.AlignRight)
        self.more_button = QToolButton()
        self.more_button.setText("More")
        self.more_button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.more_button.clicked.connect(self._more_or_less)
        self.more_button.hide()
        self.label.cut_changed.connect(lambda _cut: self._update_more())
        side.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignRight)
        self.restart_button = QPushButton("Restart engine")
        self.restart_button.clicked.connect(self.restart_requested)
        side.addWidget(self.restart_button, 0, Qt.AlignmentFlag.AlignRight)
        side.addStretch(1)
        lay.addLayout(side)
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
        note rather than a warning; `while_model`: the text holds only while that model is the one in use
        (NO_MODEL: while none is)."""
        self.while_model = while_model
        if info != self.info:
            self.info = info
            self.restyle()
        self.label.set_expanded(False)
        self.label.set_full_text(text)
        self._update_more()
        set_plain_tooltip(self.label, details)
        self.restart_button.setVisible(restart)
        self.show()

    def text(self) -> str:
        """The whole news, however much of it is shown."""
        return self.label.full_text()

    def _more_or_less(self) -> None:
        self.label.set_expanded(not self.label.expanded())
        self._update_more()

    def _update_more(self) -> None:
        expanded = self.label.expanded()
        self.more_button.setText("Less" if expanded else "More")
        self.more_button.setToolTip("Show only the first lines" if expanded else "Show all of the message")
        self.more_button.setVisible(expanded or self.label.is_cut())

    def model_changed(self, model_path: str) -> None:
        """`model_path` is the model in use now: news about another one is out of date."""
        if self.while_model is not None and model_path != self.while_model:
            self.while_model = None
            self.hide()
