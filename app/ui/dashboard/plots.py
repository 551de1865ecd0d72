"""The dashboard's plot widgets: one look for every pyqtgraph plot, a hint over an empty one, and axis ranges
in nice steps (a range change redraws the axes, so ranges should change rarely)."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGraphicsItem, QLabel, QVBoxLayout

from app.ui.dashboard.plot_texts import PlotTexts
from app.ui.toolkit import theme

PLOT_HEIGHT = 150


def nice_ceiling(v: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above `v` (> 0): axis ranges that change rarely while data
    grows (a range change redraws the axes' tick text: ~10 ms in software, 25× the bars themselves)."""
    exp = 10.0 ** math.floor(math.log10(v))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * exp >= v * (1 - 1e-12):
            return step * exp
    return 10.0 * exp


def make_plot(title: str, left: str, bottom: str) -> pg.PlotWidget:
    w = pg.PlotWidget()
    # A fixed height: when a wrapped label elsewhere changes height, the dashboard scrolls a little instead
    # of squeezing every plot (each resize is a full pyqtgraph re-layout and redraw, ~10 ms, mid-reply).
    w.setFixedHeight(PLOT_HEIGHT + 40)
    w.setTitle(title, size="9pt")
    w.setLabel("left", left)
    w.setLabel("bottom", bottom)
    w.showGrid(x=True, y=True, alpha=0.25)
    w.setMenuEnabled(False)
    w.setMouseEnabled(x=False, y=False)
    w.hideButtons()
    # A plot takes no keys (no zoom, no pan): no Tab stop, which would show no focus either
    w.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    w.viewport().setFocusPolicy(Qt.FocusPolicy.NoFocus)
    for name in ("left", "bottom"):
        # Units are in the axis titles: pyqtgraph's automatic "(x0.001)" on a range under 1 only confuses.
        w.getAxis(name).enableAutoSIPrefix(False)
        # Axes are drawn once into a pixmap and reused until their range changes: replaying their tick text
        # (shaped by HarfBuzz on every paint) was the largest part of a live-plot update.
        w.getPlotItem().getAxis(name).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    w.texts = PlotTexts(w, title, bottom)  # a narrow dock: whole parts of the titles, never a cut word
    return w


def empty_label(plot: pg.PlotWidget, text: str) -> QLabel:
    """A centred hint over an empty plot (hidden once it has data)."""
    label = QLabel(text, plot)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
    restyle_empty_label(label)
    lay = QVBoxLayout(plot)
    lay.addWidget(label)
    return label


def restyle_empty_label(label: QLabel) -> None:
    """An empty plot's hint in the theme's muted colour (again after a theme switch)."""
    label.setStyleSheet(f"color: {theme.colors().muted}; background: transparent;")


def restyle_plot(plot: pg.PlotWidget, base: str, muted: str, text: str) -> None:
    plot.setBackground(base)
    for axis in ("left", "bottom"):
        ax = plot.getAxis(axis)
        ax.setPen(pg.mkPen(muted))
        ax.setTextPen(pg.mkPen(text))
    plot.getPlotItem().titleLabel.setText(plot.getPlotItem().titleLabel.text, color=text)
    legend = plot.getPlotItem().legend
    if legend is not None:  # its labels were pyqtgraph's own grey, faint on the light theme's white
        legend.setLabelTextColor(text)
