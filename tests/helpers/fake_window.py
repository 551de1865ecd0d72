"""The tests' one way to build a MainWindow (`make_window`), and the `window` fixture on it: the fake engine, a
fresh chat store and default settings, for the window tests that need no model process (tests/conftest.py loads
this module as a plugin)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.chat.store import ChatStore
from app.core.config.settings import LoadResult, Settings


def make_window(qtbot: Any, *, store: ChatStore | None = None, settings: Settings | None = None,
                engine: Any = None, as_started: bool = False) -> Any:
    """The one way the tests build a MainWindow, closed with the test by qtbot. By default on the fake engine
    (or `engine`), with `settings` (or the defaults), measuring no bandwidth. `as_started`: the window as
    `roofline` starts it instead, for the real-model tests and those of start-up: its own engine process, the
    settings file read (unless `settings` is given) and the bandwidth measured on the first load."""
    from app.ui.window.main_window import MainWindow
    from fake_engine import fake_engine

    settings_result = LoadResult(settings) if settings is not None else None
    if not as_started:
        settings_result = settings_result or LoadResult(Settings())
        engine = engine or fake_engine()
    win = MainWindow(store=store, settings_result=settings_result, engine=engine)
    qtbot.addWidget(win)
    win.measure_bandwidth_on_load = as_started
    return win


@pytest.fixture
def window(qtbot: Any, tmp_path: Path) -> Iterator[Any]:
    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()
    store.close()


@pytest.fixture
def models_window(qtbot: Any) -> Iterator[Any]:
    """A shown window whose Models page, once opened, is shut down (its library reader stopped) at the end."""
    win = make_window(qtbot)
    win.show()
    yield win
    page = win.models_page.widget
    if page is not None:
        page.shutdown()
        qtbot.waitUntil(lambda: not page.busy(), timeout=20000)
    win.close()


def open_models_page(win: Any, qtbot: Any, listed: bool = False) -> Any:
    """The Models page as a click on its tab opens it, once it is idle (`listed`: with its library read)."""
    win.pages.setCurrentWidget(win.models_page)
    page = win.models_page.ensure()
    qtbot.waitUntil(lambda: not page.busy() and (not listed or bool(page.library_model.rows)), timeout=20000)
    return page


def settle(qtbot: Any) -> None:
    """Let the window lay itself out: posted layout and show events, then a short wait for timers."""
    from PySide6.QtWidgets import QApplication

    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(50)
