"""The Models page's status lines are where the user looks, inside the part of the page a 800×600 window shows:
Discover's search says what it is doing under the search field, and the page's own line (an import, a finished
download) stays in view at the bottom; both went below the fold. The window on the fake engine, the loopback
hub."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication, QLabel, QScrollArea, QWidget

from app.core.hub import listing as hub
from fake_window import open_models_page
from hubserver import HubServer

pytestmark = pytest.mark.gui


def _in_view(widget: QWidget, scroll: QScrollArea) -> bool:
    """Whether what `widget` shows (a label: its text as drawn) is inside the scroll area's viewport now."""
    viewport = scroll.viewport()
    shown = QRect(viewport.mapTo(scroll.window(), viewport.rect().topLeft()), viewport.size())
    drawn = widget.rect()
    if isinstance(widget, QLabel):
        flags = int(widget.alignment()) | (int(Qt.TextFlag.TextWordWrap) if widget.wordWrap() else 0)
        drawn = widget.fontMetrics().boundingRect(widget.contentsRect(), flags, widget.text())
    where = QRect(widget.mapTo(scroll.window(), drawn.topLeft()), drawn.size())
    return widget.isVisible() and where.height() > 0 and shown.contains(where)


def _said(page: QWidget, words: str) -> bool:
    return any(words in label.text() for label in page.findChildren(QLabel))


def _saying(page: QWidget, words: str) -> QLabel:
    """The label of the page that says `words` (wherever the page puts it)."""
    labels = [label for label in page.findChildren(QLabel) if words in label.text()]
    assert len(labels) == 1, f"{len(labels)} labels say {words!r}"
    return labels[0]


def _search_as_a_user(win: Any, qtbot: Any, query: str) -> Any:
    win.resize(800, 600)
    page = open_models_page(win, qtbot)
    tabs = page.tabs.tabBar()
    qtbot.mouseClick(tabs, Qt.MouseButton.LeftButton, pos=tabs.tabRect(1).center())  # Discover
    qtbot.mouseClick(page.search_edit, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(page.search_edit, query)
    qtbot.keyClick(page.search_edit, Qt.Key.Key_Return)
    return page


def _settle() -> None:
    for _ in range(5):
        QApplication.processEvents()


@pytest.mark.parametrize(("query", "says"), [("llama", "1 repositories"), ("nothing-like-it", "no GGUF repositories")])
def test_the_search_status_is_in_view_at_800x600(models_window: Any, qtbot: Any, hub_server: HubServer,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 query: str, says: str) -> None:
    small = tmp_path / "m.gguf"
    small.write_bytes(b"GGUF" + bytes(60))
    hub_server.state.add_repo("acme/Llama-GGUF", {"llama-Q4_0.gguf": small})
    answer = threading.Event()  # the hub answers only once "searching…" was looked at
    search = hub.search
    monkeypatch.setattr(hub, "search", lambda *a, **kw: answer.wait(30) and search(*a, **kw))
    page = _search_as_a_user(models_window, qtbot, query)
    scroll = page.parentWidget().parentWidget()  # the Models page scrolls in a small window (LazyPage)
    assert isinstance(scroll, QScrollArea)
    _settle()
    assert _in_view(_saying(page, "searching…"), scroll)
    answer.set()
    qtbot.waitUntil(lambda: _said(page, says), timeout=15000)
    _settle()
    assert _in_view(page.search_edit, scroll) and _in_view(_saying(page, says), scroll)


def test_a_search_error_is_in_view_at_800x600(models_window: Any, qtbot: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page = _search_as_a_user(models_window, qtbot, "llama")
    scroll = page.parentWidget().parentWidget()
    assert isinstance(scroll, QScrollArea)
    qtbot.waitUntil(lambda: _said(page, "offline mode is on"), timeout=15000)
    _settle()
    error = _saying(page, "offline mode is on")
    assert _in_view(error, scroll) and "c5221f" in error.styleSheet()  # in red


def test_the_page_status_line_stays_in_view_at_800x600(models_window: Any, qtbot: Any, tmp_path: Path) -> None:
    from synth_gguf import write_synthetic_gguf

    models_window.resize(800, 600)
    page = open_models_page(models_window, qtbot, listed=False)
    scroll = page.parentWidget().parentWidget()
    assert isinstance(scroll, QScrollArea)
    page.import_file(str(write_synthetic_gguf(tmp_path / "outside.gguf", n_layers=1)))  # Import… ▸ Copy
    qtbot.waitUntil(lambda: _said(page, "imported outside.gguf"), timeout=15000)
    _settle()
    assert _in_view(_saying(page, "imported outside.gguf"), scroll)  # the page did not grow past the window
    assert scroll.verticalScrollBar().maximum() == 0
