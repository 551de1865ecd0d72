"""A card's line of text that is never cut: when it is wider than the card, it breaks into lines, first at its
" · " separators, then at spaces ("restored 159 tokens in 8 ms" stays whole on a second line rather than
ending "in 8 m"), up to MAX_LINES; only a text longer than that is elided, with "…".

The label's height follows its line count and changes only when that count does, so a number updated with
each token (same length or close) never re-lays out the dashboard. `text()` stays the text as set: the
breaking happens only where it is drawn.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy

MAX_LINES = 3
SEPARATOR = " · "


def break_text(text: str, fits: Callable[[str], bool], max_lines: int = MAX_LINES) -> list[str]:
    """`text` as lines for which `fits(line)` holds (greedy: parts joined while they fit), at most `max_lines`
    (the last then holds the rest, to be elided). A line that ends at a " · " drops it."""
    if not text or fits(text):
        return [text]
    parts: list[tuple[str, str]] = []  # (joiner before it, part)
    for i, segment in enumerate(text.split(SEPARATOR)):
        joiner = SEPARATOR if i else ""
        if fits(segment):
            parts.append((joiner, segment))
        else:  # a segment too long alone: its words
            words = segment.split(" ")
            parts += [(joiner if j == 0 else " ", word) for j, word in enumerate(words)]
    lines: list[str] = []
    current = ""
    for joiner, part in parts:
        candidate = current + joiner + part if current else part
        if current and not fits(candidate):
            lines.append(current)
            current = part
        else:
            current = candidate
    lines.append(current)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [" ".join(lines[max_lines - 1:])]
    return lines


class CardLine(QLabel):
    def __init__(self, text: str = ""):
        super().__init__(text)
        self.setMinimumWidth(1)  # the dock may be narrow: the text breaks instead of widening it
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._fit()

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self._fit()

    def lines(self) -> list[str]:
        """The lines the text is drawn as at the label's present width."""
        width = self.contentsRect().width()
        if width <= 1:  # not laid out yet
            return [self.text()]
        metrics = self.fontMetrics()
        return break_text(self.text(), lambda line: metrics.horizontalAdvance(line) <= width)

    def _fit(self) -> None:
        height = len(self.lines()) * self.fontMetrics().lineSpacing() + 2
        if self.height() != height or self.minimumHeight() != height:
            self.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._fit()

    def paintEvent(self, event: QPaintEvent) -> None:
        lines = self.lines()
        if len(lines) == 1 and self.fontMetrics().horizontalAdvance(lines[0]) <= self.contentsRect().width():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        rect = self.contentsRect()
        metrics = self.fontMetrics()
        step = metrics.lineSpacing()
        for i, line in enumerate(lines):
            shown = metrics.elidedText(line, Qt.TextElideMode.ElideRight, rect.width())
            row = rect.adjusted(0, i * step, 0, 0)
            row.setHeight(step)
            self.style().drawItemText(painter, row, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                                      self.palette(), self.isEnabled(), shown, self.foregroundRole())
        painter.end()
