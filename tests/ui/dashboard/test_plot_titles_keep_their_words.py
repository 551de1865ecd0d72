"""The dashboard's plots never cut their titles at 800×600: a reply played through the fake engine, the window at
1600×1000 and 800×600, and every plot shows its title and bottom-axis title whole or without whole parts from
the end ("Inter-token latency", never "Inter-token latency, curren"), as wide as it is given (nothing clipped at
the right edge, where the last tick lost a digit), with the whole titles in its tooltip when it leaves a part
out. What the dashboard's cards show is checked in test_cards_keep_their_words.py."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication
from test_cards_keep_their_words import long_reply

from app.ui.dashboard.plot_texts import shorter_forms

pytestmark = pytest.mark.gui

ITL_TITLE = "Inter-token latency, current reply"
ROOFLINE_AXIS = "arithmetic intensity (FLOPs/byte)"


def test_shorter_forms_drop_whole_parts_from_the_end() -> None:
    assert shorter_forms(ITL_TITLE) == [ITL_TITLE, "Inter-token latency"]
    assert shorter_forms(ROOFLINE_AXIS) == [ROOFLINE_AXIS, "arithmetic intensity"]
    assert shorter_forms("Requests (server)") == ["Requests (server)", "Requests"]
    assert shorter_forms("reply #") == ["reply #"]


@pytest.mark.parametrize("size", [(1600, 1000), (800, 600)])
def test_no_plot_cuts_its_titles(window, qtbot, size: tuple[int, int]) -> None:
    long_reply(window)
    window.resize(*size)
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(50)
    assert window.dock.isVisible()
    plots = [p for p in window.dashboard.findChildren(pg.PlotWidget) if p.isVisible()]
    assert len(plots) >= 5
    shown = {}
    for plot in plots:
        title, bottom = plot.texts.shown()
        full_title, full_bottom = plot.texts.title_forms[0], plot.texts.bottom_forms[0]
        shown[full_title or full_bottom] = (title, bottom)
        assert title in shorter_forms(full_title) and bottom in shorter_forms(full_bottom), (title, bottom)
        item = plot.getPlotItem()
        assert item.geometry().width() <= plot.viewport().width() + 1, f"{full_title!r} is clipped at {size}"
        if (title, bottom) != (full_title, full_bottom):
            assert full_title in plot.toolTip() and full_bottom in plot.toolTip()
    if size == (1600, 1000):  # room enough: every title whole
        assert shown[ITL_TITLE] == (ITL_TITLE, "ms") and shown[ROOFLINE_AXIS] == ("", ROOFLINE_AXIS)
    else:  # the dock is about 240 px wide: the long ones lose their last part, whole
        assert shown[ITL_TITLE] == ("Inter-token latency", "ms")
        assert shown[ROOFLINE_AXIS] == ("", "arithmetic intensity")
