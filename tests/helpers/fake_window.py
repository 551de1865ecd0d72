"""A MainWindow on the fake engine, a fresh chat store and default settings: the `window` fixture of the
window tests that need no model process (tests/conftest.py loads this module as a plugin)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.chat.store import ChatStore
from app.core.config.settings import LoadResult, Settings


def make_window(qtbot: Any, *, store: ChatStore | None = None, settings: Settings | None = None,
                engine: Any = None) -> Any:
    """A MainWindow on the fake engine (or `engine`), closed with the test by qtbot, measuring no bandwidth:
    the one way the window tests build a window."""
    from app.ui.window.main_window import MainWindow
    from fake_engine import fake_engine

    win = MainWindow(store=store, settings_result=LoadResult(settings or Settings()), engine=engine or fake_engine())
    qtbot.addWidget(win)
    win.measure_bandwidth_on_load = False
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
