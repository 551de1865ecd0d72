"""A one-line label that never cuts its text mid-word or mid-number: it is given its text in a few forms, from
the fullest to the shortest, and shows the fullest that fits its width ("Q4_K_M · ctx 4096 · template gemma"
rather than "Q4_K_M · ctx 4"). Plain `setText("a · b · c")` offers "a · b · c", "a · b" and "a": the parts
after a " · " are the ones to go first. Only when even the shortest form does not fit is that one elided,
with "…".

Its size hints are those of its forms, never of the text it shows at the moment: a toolbar lays it out at the
fullest form's width when there is room and may squeeze it down to the shortest's, and changing what it shows
never asks the layout for another width (no resize loop)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QWidget

SEPARATOR = " · "
MIN_SHORT_WIDTH = 160  # px: a shortest form wider than this (a long file name) may be elided below it


def dropping_parts(text: str, separator: str = SEPARATOR) -> list[str]:
    """`text` and its shorter forms, each with one more trailing part dropped."""
    parts = text.split(separator)
    return [separator.join(parts[:n]) for n in range(len(parts), 0, -1)]


class WholePartsLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self._forms: list[str] = [text]
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    # ------------------------------------------------------------------ text
    def setText(self, text: str) -> None:  # type: ignore[override]  # noqa: N802 - Qt's name
        """Show `text`, dropping its trailing " · " parts where it does not fit."""
        self.set_forms(dropping_parts(text))

    def set_forms(self, forms: list[str]) -> None:
        """The text in its forms, from the fullest (first) to the shortest (last)."""
        self._forms = [form for form in forms if form] or [""]
        self.updateGeometry()
        self._fit()

    def full_text(self) -> str:
        return self._forms[0]

    # ------------------------------------------------------------------ fitting
    def _room(self) -> int:
        return self.contentsRect().width() - 2 * self.margin()

    def _advance(self, text: str) -> int:
        return self.fontMetrics().horizontalAdvance(text)

    def _fit(self) -> None:
        room = self._room()
        shown = next((form for form in self._forms if self._advance(form) <= room), None)
        if shown is None:  # not even the shortest fits: the one case for "…"
            shown = self.fontMetrics().elidedText(self._forms[-1], Qt.TextElideMode.ElideRight, max(0, room))
        if shown != super().text():
            super().setText(shown)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    # ------------------------------------------------------------------ size hints
    def _extra(self) -> int:
        margins = self.contentsMargins()
        return margins.left() + margins.right() + 2 * self.margin() + 1

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(self._advance(self._forms[0]) + self._extra(), hint.height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        shortest = min(self._advance(self._forms[-1]), MIN_SHORT_WIDTH)
        return QSize(shortest + self._extra(), hint.height())
