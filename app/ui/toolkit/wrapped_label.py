"""A word-wrapped label that is always as tall as its whole text at its own width: for the help and problem lines
under a form's fields, whose text changes as the user edits the field.

Why not QLabel's word wrap alone: a QFormLayout gives a height-for-width row the height it worked out for the
last width it was asked about, and it is asked about other widths (its size hint, a scroll area trying with and
without its scroll bar), so a line re-worded to three lines kept the height of two and lost its end (Settings'
context line). This label answers no height-for-width question: it fixes its height to its text's at its width
whenever the text or the width changes, and the layout only follows that fixed height. Its width never depends
on its height, so this settles at once. (In a scroll area, a height-for-width child also made the whole page
ask for its preferred height: the Models page doubled in height once its status line had text.)
"""

from __future__ import annotations

from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class WrappedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def hasHeightForWidth(self) -> bool:
        """No: the fixed height is the answer (QLabel would say yes again with every new text)."""
        return False

    def setText(self, text: str) -> None:  # type: ignore[override]  # noqa: N802 - Qt's name
        super().setText(text)
        self._fit()

    def _fit(self) -> None:
        height = self.heightForWidth(max(1, self.width())) if self.text() else 0
        if height != self.minimumHeight() or height != self.maximumHeight():
            self.setFixedHeight(max(0, height))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._fit()
