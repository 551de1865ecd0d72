"""A plot's title and bottom-axis title in the fullest form that fits the plot's width, dropping whole parts from
the end — "Inter-token latency, current reply", then "Inter-token latency"; "arithmetic intensity (FLOPs/byte)",
then "arithmetic intensity" — the way the toolbar's model line does (app/ui/toolkit/whole_parts_label.py). The
whole texts are in the plot's tooltip whenever a part is left out.

Why: pyqtgraph lays a plot out at least as wide as its left axis and its title side by side, and a plot wider
than its widget is clipped at the widget's right edge. In the dashboard of an 800×600 window (the dock about
240 px wide) that cut the titles mid-word ("Inter-token latency, curren", "arithmetic intensity (FLOPs/by")
and the last tick mid-number ("8" for "80").
"""

from __future__ import annotations

import re

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QFont, QFontMetrics

# where a title may be shortened: before a trailing " (…)" remark, and at ", " and " · "
_BREAKS = re.compile(r" \(|, | · ")
MARGIN = 12  # px the plot's own frame and padding take from its width


def shorter_forms(text: str) -> list[str]:
    """`text`, then each shorter form that ends at one of its breaks (a " (…)" remark, a ", " or " · " part)."""
    return [text] + [text[:m.start()] for m in reversed(list(_BREAKS.finditer(text))) if m.start() > 0]


class PlotTexts(QObject):
    """Keeps `plot`'s title and bottom-axis title to what fits its width, as the plot is resized."""

    def __init__(self, plot: pg.PlotWidget, title: str, bottom: str):
        super().__init__(plot)
        self.plot = plot
        self.title_forms = shorter_forms(title)
        self.bottom_forms = shorter_forms(bottom)
        plot.installEventFilter(self)
        self.fit()

    def set_title(self, title: str) -> None:
        self.title_forms = shorter_forms(title)
        self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def fit(self) -> None:
        item = self.plot.getPlotItem()
        # both sit in the data's column, right of the left axis: a title wider than that widens the plot
        room = self.plot.width() - MARGIN - self.plot.getAxis("left").width()
        title = _fullest(self.title_forms, room, self.title_font())
        if title != item.titleLabel.text:
            item.setTitle(title)  # (its size and colour are kept by the label)
        axis = self.plot.getAxis("bottom")
        bottom = _fullest(self.bottom_forms, room, QFont(axis.label.font()))
        if bottom != axis.labelText:
            axis.setLabel(bottom)
        whole = [form for form in (self.title_forms[0], self.bottom_forms[0]) if form]
        shortened = title != self.title_forms[0] or bottom != self.bottom_forms[0]
        self.plot.setToolTip(" — ".join(whole) if shortened else "")

    def shown(self) -> tuple[str, str]:
        """The title and bottom-axis title the plot shows now."""
        return self.plot.getPlotItem().titleLabel.text, self.plot.getAxis("bottom").labelText

    def title_font(self) -> QFont:
        """The title's font: the label's, at the size its style names ("9pt")."""
        label = self.plot.getPlotItem().titleLabel
        font = QFont(label.item.font())
        size = str(label.opts.get("size", ""))
        if size.endswith("pt"):
            font.setPointSizeF(float(size[:-2]))
        return font


def _fullest(forms: list[str], room: int, font: QFont) -> str:
    metrics = QFontMetrics(font)
    return next((form for form in forms if metrics.horizontalAdvance(form) <= room), forms[-1])
