"""A keyboard user sees where the focus is (issue 32, item 8): the chat list, the system prompt, the message box
and the dashboard's scroll area (the dock's one Tab stop), which the style draws the same with the focus as
without it, get a focus border, in the light and the dark theme; so do the conversation, a message's text and
the Send button, which Fusion draws the same focused or not as the window's default button (QA, item E5). The
test Tabs to each like a keyboard user and compares the widget's edges with and without the focus; another
Tabs round the whole window and finds no Tab stop that looks the same with the focus as without it."""

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
    "conversation": lambda win: win.message_view,  # a Tab stop: the keys scroll it
    "message text": lambda win: win.message_view.widget_for(win.message_view.message_ids()[0]).body,
    "Send": lambda win: win.send_button,
}
# A button's focus ring is drawn inside the style's outline, which for the default button (Send) is in a blue
# close to the focus colour already: it is looked for there.
INSET = {"Send": 2}


def with_a_message(win) -> None:
    """A new chat holding one message (with a link: its text is a Tab stop for the keyboard's links)."""
    win.new_chat()  # a chat in the list: the list can take the focus
    conv = win.session.conversation
    win.store.add_message(conv.id, "user", "what is [prefill](https://example.org)?")
    win.open_conversation(conv.id)


@pytest.fixture(autouse=True)
def _system_theme_after(window) -> Iterator[None]:
    yield
    from app.ui.window.menus import win_set_theme

    win_set_theme(window, "system")  # the palette is the application's: leave it as the next test expects


def edge_midpoints(image: QImage, inset: int = 0) -> list[QColor]:
    """The outermost pixel in the middle of each side (where a frame's border is drawn; the corners may be round),
    or the one `inset` pixels inside it."""
    w, h = image.width(), image.height()
    i = inset
    return [image.pixelColor(x, y) for x, y in ((i, h // 2), (w - 1 - i, h // 2), (w // 2, i), (w // 2, h - 1 - i))]


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
    with_a_message(window)
    if theme_name != "light":  # the window starts light (the offscreen platform's palette)
        window.menus.theme_actions[theme_name].trigger()  # View ▸ Theme
        QApplication.processEvents()  # the palette reaches the widgets drawn by the style (a button) in events
    widget = FIELDS[field](window)
    start = window.conversations.search
    qtbot.mouseClick(start, Qt.MouseButton.LeftButton)  # the focus in the search field, above the list
    qtbot.waitUntil(start.hasFocus)
    unfocused = edge_midpoints(widget.grab().toImage(), INSET.get(field, 0))
    tab_to(widget, qtbot)
    focused = edge_midpoints(widget.grab().toImage(), INSET.get(field, 0))
    for before, after in zip(unfocused, focused, strict=True):
        assert contrast_ratio(before, after) >= NON_TEXT_CONTRAST, (
            f"{field} in the {theme_name} theme: its edge is {before.name()} without the focus, "
            f"{after.name()} with it")


def test_no_tab_stop_looks_the_same_with_the_focus(window, qtbot) -> None:
    with_a_message(window)
    window.banner.show_message("Some news")  # its ✕ is a Tab stop, and so was what came after it
    start = window.conversations.search
    qtbot.mouseClick(start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(start.hasFocus)
    unseen: list[str] = []
    for _ in range(120):
        widget = QApplication.focusWidget()
        focused = widget.grab().toImage()
        qtbot.keyClick(widget, Qt.Key.Key_Tab)
        if widget.grab().toImage() == focused:
            unseen.append(f"{type(widget).__name__} {widget.objectName()} {getattr(widget, 'text', str)()!r}")
        if QApplication.focusWidget() is start:
            break
    else:
        raise AssertionError("Tab never came back to the chat search")
    assert unseen == []
