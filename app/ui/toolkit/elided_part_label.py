"""A one-line label whose text is a fixed start, a part that may be cut and a fixed end ("“" + a chat's title +
"” deleted"): where the line does not fit its width, only the part is elided ("…"), so the words around it
always show whole. Cutting the whole line instead ("“The three primary colou…") lost what happened.

Its minimum width is the line's with the part reduced to "…"; above that it takes the width its layout gives
it (its size hint never widens a sidebar, however long the part). Plain text: the part is often a user's."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

ELLIPSIS = "…"


class ElidedPartLabel(QLabel):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._parts = ("", "", "")

    def set_parts(self, before: str, part: str, after: str) -> None:
        """Show `before + part + after`, `part` elided where the whole does not fit."""
        self._parts = (before, part, after)
        margins = self.contentsMargins()
        self.setMinimumWidth(self._advance(before + ELLIPSIS + after) + 2 * self.margin() + margins.left()
                             + margins.right() + 1)
        self._fit()

    def full_text(self) -> str:
        return "".join(self._parts)

    def _advance(self, text: str) -> int:
        return self.fontMetrics().horizontalAdvance(text)

    def _fit(self) -> None:
        before, part, after = self._parts
        room = self.contentsRect().width() - 2 * self.margin() - self._advance(before + after) - 1
        shown = part
        if self._advance(part) > room:
            shown = self.fontMetrics().elidedText(part, Qt.TextElideMode.ElideRight, max(0, room)) or ELLIPSIS
        text = before + shown + after
        if text != self.text():
            super().setText(text)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()
