"""A table's columns fitted to the width it has: every column at its contents' width, one column (`stretch`)
taking the room left over, and where there is not enough room the long columns (`shrink_first`, in order) give
it up down to a floor, their text elided in the middle (a path keeps its file name, a model name its quant).

Why: the Library's thirteen columns, each sized to its contents, were wider than the page even in a 1600 px
window (the model files' full paths in the last one), so the table scrolled sideways and the location was off
screen. Only when even the floors do not fit (a narrow window) does the table still scroll.

The widths are worked out again when the rows change and when the view is resized; a column the user drags
keeps its width until then.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QHeaderView, QTableView

FLOOR_CHARS = 16  # a shrunk column still shows about this many characters


class ColumnFit(QObject):
    def __init__(self, view: QTableView, stretch: int, shrink_first: Sequence[int]):
        super().__init__(view)
        self.view = view
        self.stretch = stretch
        self.shrink_first = list(shrink_first)
        header = view.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        model = view.model()
        for signal in (model.modelReset, model.rowsInserted, model.rowsRemoved, model.dataChanged,
                       model.layoutChanged):
            signal.connect(self.fit)
        view.viewport().installEventFilter(self)
        self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def natural_width(self, column: int) -> int:
        """The column's width for its whole contents and its title."""
        return max(self.view.sizeHintForColumn(column), self.view.horizontalHeader().sectionSizeHint(column))

    def widths(self, room: int) -> list[int]:
        """Each column's width in `room` px (see the module docstring)."""
        header = self.view.horizontalHeader()
        widths = [0 if header.isSectionHidden(c) else self.natural_width(c) for c in range(header.count())]
        spare = room - sum(widths)
        if spare >= 0:
            if 0 <= self.stretch < len(widths):
                widths[self.stretch] += spare
            return widths
        floor = self.view.fontMetrics().averageCharWidth() * FLOOR_CHARS
        for column in self.shrink_first:
            if spare >= 0:
                break
            give = min(-spare, max(0, widths[column] - floor))
            widths[column] -= give
            spare += give
        return widths

    def fit(self) -> None:
        header = self.view.horizontalHeader()
        for column, width in enumerate(self.widths(self.view.viewport().width())):
            if not header.isSectionHidden(column) and header.sectionSize(column) != width:
                header.resizeSection(column, width)
