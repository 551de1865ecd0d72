"""The Models and Lab pages inside the main window: built on first view, wired to the chat's engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ui.window.main_window import MainWindow

OFFSCREEN_NOISE = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
pytestmark = [pytest.mark.gui, OFFSCREEN_NOISE]


def test_pages_are_built_when_first_opened(qtbot) -> None:
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    assert win.models_page.widget is None and win.lab_page.widget is None
    win.pages.setCurrentWidget(win.lab_page)
    qtbot.waitUntil(lambda: win.lab_page.widget is not None)
    from app.ui.lab.page import LabPage

    assert isinstance(win.lab_page.widget, LabPage)
    assert win.models_page.widget is None  # still untouched


@pytest.mark.model
def test_choosing_a_model_in_the_library_loads_it_in_the_chat(qtbot, default_model: Path) -> None:
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    win.measure_bandwidth_on_load = False
    win.pages.setCurrentWidget(win.models_page)
    qtbot.waitUntil(lambda: win.models_page.widget is not None)
    page = win.models_page.widget
    page.model_chosen.emit(str(default_model))  # what a double-click on a library row emits
    assert win.pages.currentWidget() is win.chat_page
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None, timeout=90_000)
    assert win.engine.loaded_info.model_path == str(default_model)
    assert win.session.model_path == str(default_model)
    # The library remembers when it was last used.
    from app.core.models.library import find

    entry = find(default_model)
    assert entry is not None and entry.last_used is not None
    win.close()
