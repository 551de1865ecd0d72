"""Axis titles carry their units: no plot may add pyqtgraph's automatic scale suffix ("(x0.001)") when its
range is under 1, as an empty or cancelled result's is."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

pytestmark = pytest.mark.gui


def axis_titles(plot) -> list[str]:
    return [plot.getAxis(name).labelString() for name in ("left", "bottom")]


def test_dashboard_plots_never_add_a_scale_suffix(qtbot) -> None:
    from app.ui.dashboard.plots import make_plot

    plot = make_plot("Decode tok/s per reply", "tok/s", "reply #")
    qtbot.addWidget(plot)
    plot.show()
    plot.setXRange(0, 0.5, padding=0)
    plot.setYRange(0, 0.005, padding=0)
    QApplication.processEvents()
    assert all("(x" not in title for title in axis_titles(plot)), axis_titles(plot)
