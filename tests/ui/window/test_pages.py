"""The Models and Lab pages inside the main window: built on first view, wired to the chat's engine; the
window's Qt models and its page tabs."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.chat.store import ChatStore
from fake_window import make_window

pytestmark = pytest.mark.gui


def test_pages_are_built_when_first_opened(qtbot) -> None:
    win = make_window(qtbot, as_started=True)
    win.show()
    assert win.models_page.widget is None and win.lab_page.widget is None
    win.pages.setCurrentWidget(win.lab_page)
    qtbot.waitUntil(lambda: win.lab_page.widget is not None)
    from app.ui.lab.page import LabPage

    assert isinstance(win.lab_page.widget, LabPage)
    assert win.models_page.widget is None  # still untouched


@pytest.mark.model
def test_choosing_a_model_in_the_library_loads_it_in_the_chat(qtbot, default_model: Path) -> None:
    win = make_window(qtbot, as_started=True)
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


def test_window_list_models(qtbot, qtmodeltester):

    store = ChatStore()  # two chats in the default store: the list has rows to check
    for title in ("One", "Two"):
        store.add_message(store.create_conversation(title).id, "user", f"about {title.lower()}")
    store.close()
    win = make_window(qtbot, as_started=True)
    qtmodeltester.check(win.conversations.model, force_py=True)
    qtmodeltester.check(win.model_combo.model(), force_py=True)
    assert win.model_combo.count() >= 2  # the default model and "Open GGUF file…"
    assert [win.pages.tabText(i) for i in range(win.pages.count())] == ["Chat", "Models", "Lab"]
    from PySide6.QtWidgets import QLabel

    win.add_page("Extra", QLabel("extra"))
    assert win.pages.count() == 4 and win.pages.tabText(3) == "Extra"
