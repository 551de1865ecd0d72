"""A keyboard user sees where the focus is (issue 32, item 8): the chat list, the system prompt, the message box
and the dashboard's scroll area (the dock's one Tab stop), which the style draws the same with the focus as
without it, get a focus border, in the light and the dark theme. The test Tabs to each like a keyboard user
and compares the widget's edges with and without the focus."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QWidget

from contrast import NON_TEXT_CONTRAST, contrast_ratio

pytestmark = pytest.mark.gui

FIELDS: dict[str, Callable[[Any], QWidget]] = {
    "chat list": lambda win: win.conversations.view,
    "system prompt": lambda win: win.sampling_panel.system_prompt,
    "message box": lambda win: win.input,
    "dashboard": lambda win: win.dock.widget(),  # its scroll area: the dock's one Tab stop
}


@pytest.fixture(autouse=True)
def _system_theme_after(window) -> Iterator[None]:
    yield
    from app.ui.window.menus import win_set_theme

    win_set_theme(window, "system")  # the palette is the application's: leave it as the next test expects


def edge_midpoints(image: QImage) -> list[QColor]:
    """The outermost pixel in the middle of each side (where a frame's border is drawn; the corners may be round)."""
    w, h = image.width(), image.height()
    return [image.pixelColor(x, y) for x, y in ((0, h // 2), (w - 1, h // 2), (w // 2, 0), (w // 2, h - 1))]


def tab_to(widget: QWidget, qtbot) -> None:
    """Press Tab until `widget` has the focus, as a keyboard user would."""
    for _ in range(120):
        if widget.hasFocus():
            return
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
    raise AssertionError(f"Tab never reached {widget!r}")


@pytest.mark.parametrize("theme_name", ["light", "dark"])
@pytest.mark.parametrize("field", list(FIELDS))
def test_the_focused_field_shows_it(window, qtbot, theme_name: str, field: str) -> None:
    window.new_chat()  # a chat in the list: the list can take the focus
    if theme_name != "light":  # the window starts light (the offscreen platform's palette)
        window.menus.theme_actions[theme_name].trigger()  # View ▸ Theme
    widget = FIELDS[field](window)
    start = window.conversations.search
    qtbot.mouseClick(start, Qt.MouseButton.LeftButton)  # the focus in the search field, above the list
    qtbot.waitUntil(start.hasFocus)
    unfocused = edge_midpoints(widget.grab().toImage())
    tab_to(widget, qtbot)
    focused = edge_midpoints(widget.grab().toImage())
    for before, after in zip(unfocused, focused, strict=True):
        assert contrast_ratio(before, after) >= NON_TEXT_CONTRAST, (
            f"{field} in the {theme_name} theme: its edge is {before.name()} without the focus, "
            f"{after.name()} with it")
