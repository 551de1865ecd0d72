"""The Models page at 800x600 with the dashboard shown (a QA pass): the page fits the width it gets (no sideways
scrolling, no button cut at its edge), Discover's recommended list shows whole rows with the best pick at the
top, and the predictions legend shows its whole text."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton, QScrollArea

from fake_window import open_models_page

pytestmark = pytest.mark.gui

BUTTON_PADDING = 8  # the style's margins around a push button's text, at the least


def _small_page(win: Any, qtbot: Any, tab: int) -> tuple[Any, QScrollArea]:
    win.resize(800, 600)
    win.dock.show()
    page = open_models_page(win, qtbot)
    bar = page.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(tab).center())
    qtbot.waitUntil(lambda: not page.picks.assessing, timeout=20000)
    for _ in range(5):
        QApplication.processEvents()
    scroll = page.parentWidget().parentWidget()
    assert isinstance(scroll, QScrollArea)
    return page, scroll


@pytest.mark.parametrize("tab", [0, 1], ids=["library", "discover"])
def test_the_page_fits_800x600_with_its_buttons_whole(models_window: Any, qtbot: Any, tab: int) -> None:
    page, scroll = _small_page(models_window, qtbot, tab)
    assert models_window.dock.isVisible()
    assert scroll.horizontalScrollBar().maximum() == 0, "the page scrolls sideways"
    assert page.width() <= scroll.viewport().width()
    shown = [b for b in page.findChildren(QPushButton) if b.isVisible()]
    assert shown
    for button in shown:
        assert button.fontMetrics().horizontalAdvance(button.text()) <= button.width() - BUTTON_PADDING, \
            f"{button.text()!r} is cut"
        right = button.mapTo(page, button.rect().topRight()).x()
        assert right < scroll.viewport().width(), f"{button.text()!r} is past the page's edge"


def test_discover_shows_whole_recommended_rows_and_its_legend(models_window: Any, qtbot: Any) -> None:
    page, _scroll = _small_page(models_window, qtbot, 1)
    view = page.picks.view
    first = view.rowAt(0)
    assert first >= 0
    top = view.rowViewportPosition(first)
    assert top >= 0 and top + view.rowHeight(first) <= view.viewport().height(), "the first row is cut"
    assert page.picks.model.best is not None
    best = next(i for i, m in enumerate(page.picks.model.models) if m.title == page.picks.model.best)
    # the best pick at the top, or as high as the list's end lets it go (scrolled all the way), whole
    bar = view.verticalScrollBar()
    assert first == best or (first < best and bar.value() == bar.maximum())
    best_top = view.rowViewportPosition(best)
    assert best_top >= 0 and best_top + view.rowHeight(best) <= view.viewport().height()
    whole_rows = view.viewport().height() // view.rowHeight(first)
    assert whole_rows >= 2 or whole_rows >= len(page.picks.model.models) - first
    legend = page.discover_legend
    assert legend.isVisible() and legend.height() >= legend.heightForWidth(legend.width())
