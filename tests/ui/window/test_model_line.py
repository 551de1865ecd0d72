"""The toolbar's model line at 1600×1000 and 800×600: it shows whole parts only (never "ctx 4" for "ctx 4096"),
drops the least important ones first as the window narrows, and its tooltip always has the whole line. Runs on
the fake engine: no model process."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.ui.window.engine_events import model_line_choices
from fake_engine import gemma_loaded
from fake_window import make_window

pytestmark = pytest.mark.gui

# a long template name: at 800 px the whole line cannot fit, so something has to go
LOADED = gemma_loaded(n_ctx=4096, load_ms=812.0, chat_template_name="gemma-3-instruct-with-tools",
                      chat_template_source="architecture")


def _settle(qtbot) -> None:
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(30)


@pytest.mark.parametrize("size", [(1600, 1000), (800, 600)])
def test_the_model_line_shows_whole_parts_that_fit(qtbot, size: tuple[int, int]) -> None:
    win = make_window(qtbot)
    win.show()
    win.resize(*size)
    win.engine.loaded.emit(LOADED)
    _settle(qtbot)
    label = win.model_info
    full = model_line_choices(LOADED)[0]
    assert full == "Q4_K_M · ctx 4096 · template gemma-3-instruct-with-tools (architecture) · load 812 ms"
    shown = label.text()
    room = label.contentsRect().width()
    assert label.fontMetrics().horizontalAdvance(shown) <= room, f"{shown!r} is cut at {size}"
    assert shown in model_line_choices(LOADED), f"{shown!r} is not a line of whole parts"
    assert shown.startswith("Q4_K_M")  # the quant is the last part to go
    assert label.toolTip() and full.split(" · ")[2] in label.toolTip()  # the whole line is in the tooltip
    if size[0] == 1600:
        assert shown == full
    else:
        assert shown != full  # the window is too narrow for everything: parts went, from the least important
    win.close()


def test_the_line_gets_its_parts_back_when_the_window_widens(qtbot) -> None:
    win = make_window(qtbot)
    win.show()
    win.resize(800, 600)
    win.engine.loaded.emit(LOADED)
    _settle(qtbot)
    narrow = win.model_info.text()
    win.resize(1600, 1000)
    _settle(qtbot)
    assert narrow != win.model_info.text() == model_line_choices(LOADED)[0]
    win.close()


def test_the_dropping_order_is_load_time_then_source_then_template() -> None:
    choices = model_line_choices(LOADED)
    assert choices == [
        "Q4_K_M · ctx 4096 · template gemma-3-instruct-with-tools (architecture) · load 812 ms",
        "Q4_K_M · ctx 4096 · template gemma-3-instruct-with-tools (architecture)",
        "Q4_K_M · ctx 4096 · template gemma-3-instruct-with-tools",
        "Q4_K_M · ctx 4096",
        "Q4_K_M",
    ]
