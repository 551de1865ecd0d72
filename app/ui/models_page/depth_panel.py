"""The Library's details for the selected model: decode speed as the context fills (predicted curve up to the
context it would load with, the user's own chats' measured points on it) and whether its chats ever came near
that context (`app.core.predict.context_view`).

The chat store is the window's (it owns it): the page is given a function from a model's path to its use
(`usage_of`), read on the GUI thread (one indexed query); the header, rates and curve are worked out in the
background.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.ui.dashboard.plots import make_plot, restyle_plot
from app.ui.toolkit import theme

UsageOf = Callable[[str], Any]  # model path → app.core.chat.model_usage.ModelUsage (or None)


def compute_view(path: str, usage: Any) -> Any:
    """Off the GUI thread: the ContextView of `path` as the app would load it, with `usage`'s points."""
    from app.core.predict.context_view import view_for_model

    points = [(p.depth, p.decode_tps) for p in getattr(usage, "points", [])]
    return view_for_model(path, points, getattr(usage, "max_tokens", 0), getattr(usage, "replies", 0))


class DepthPanel(QWidget):
    """A label and a small plot: tok/s against tokens in the context."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = QLabel("Select a model to see its decode speed as the context fills.")
        self.label.setWordWrap(True)
        self.plot = make_plot("Decode speed vs context depth", "tok/s", "tokens in the context")
        self.plot.setFixedHeight(170)
        self.predicted = self.plot.plot([], [], pen=pg.mkPen(theme.DECODE, width=2))
        self.measured = pg.ScatterPlotItem(size=7, pen=None)
        self.plot.addItem(self.measured)
        self.restyle()
        self.plot.setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.plot)

    def restyle(self) -> None:
        """The plot in the theme's colours; the chats' measured points in its amber, apart from the blue curve."""
        c = theme.colors()
        restyle_plot(self.plot, c.base, c.muted, c.text)
        self.measured.setBrush(pg.mkBrush(c.caution))

    def show_view(self, view: Any) -> None:
        self.label.setText(view.text() or "No prediction for this model.")
        xs = [p.depth for p in view.curve]
        self.predicted.setData(xs, [p.decode_tps for p in view.curve])
        self.measured.setData([d for d, _ in view.measured], [t for _, t in view.measured])
        top = max([p.decode_tps for p in view.curve] + [t for _, t in view.measured] + [1.0])
        self.plot.setYRange(0, top * 1.1, padding=0)
        self.plot.setXRange(0, max(xs + [d for d, _ in view.measured] + [1]), padding=0.02)
        self.plot.setVisible(bool(view.curve))

    def show_message(self, text: str) -> None:
        self.label.setText(text)
        self.plot.setVisible(False)
