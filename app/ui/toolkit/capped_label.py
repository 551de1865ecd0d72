"""A word-wrapped plain-text label that shows at most a few lines at its width: where the text goes on, the last
line shown ends in "…" (`is_cut`), and `set_expanded(True)` shows all of it. The banner uses it so that a long
note does not take the chat's room in a small window (the first start's note wrapped to ten lines at 800×600).

The lines are worked out with QTextLayout at the label's own width and font and joined with line breaks, so the
label shows exactly them; what is shown changes only on a new width or text, never asks for another width."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QResizeEvent, QTextLayout, QTextOption
from PySide6.QtWidgets import QLabel, QWidget


def _line_spans(paragraph: str, offset: int, font: QFont, width: int, limit: int) -> list[tuple[int, int]]:
    """Where `paragraph`'s first lines (at most `limit`), wrapped at word boundaries to `width` px, start and
    end, counted from `offset`."""
    layout = QTextLayout(paragraph, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    layout.setTextOption(option)
    spans: list[tuple[int, int]] = []
    layout.beginLayout()
    while len(spans) < limit:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        spans.append((offset + line.textStart(), offset + line.textStart() + line.textLength()))
    layout.endLayout()
    return spans or [(offset, offset)]


def capped_text(text: str, font: QFont, width: int, max_lines: int) -> str:
    """`text` as shown in at most `max_lines` lines of `width` px: itself when it fits, else its first lines
    as wrapped, and the rest elided into the last one ("…")."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for paragraph in text.split("\n"):
        spans.extend(_line_spans(paragraph, offset, font, width, max_lines + 1 - len(spans)))
        offset += len(paragraph) + 1
        if len(spans) > max_lines:
            break
    if len(spans) <= max_lines:
        return text
    head = [text[start:end].rstrip() for start, end in spans[:max_lines - 1]]
    rest = " ".join(text[spans[max_lines - 1][0]:].split())  # on one line: its line breaks as spaces
    return "\n".join([*head, QFontMetrics(font).elidedText(rest, Qt.TextElideMode.ElideRight, width)])


class CappedLabel(QLabel):
    cut_changed = Signal(bool)  # whether the text shown is cut short now

    def __init__(self, max_lines: int = 3, parent: QWidget | None = None):
        super().__init__(parent)
        self.max_lines = max_lines
        self._full = ""
        self._expanded = False
        self._cut = False
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._fit()

    def full_text(self) -> str:
        return self._full

    def set_expanded(self, expanded: bool) -> None:
        self._expanded = expanded
        self._fit()

    def expanded(self) -> bool:
        return self._expanded

    def is_cut(self) -> bool:
        return self._cut

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        width = self.contentsRect().width() - 2 * self.margin()
        shown = self._full
        if not self._expanded and width > 0:
            shown = capped_text(self._full, self.font(), width, self.max_lines)
        if shown != self.text():
            self.setText(shown)
        cut = shown != self._full
        if cut != self._cut:
            self._cut = cut
            self.cut_changed.emit(cut)
