"""Keyboard only (issue 32, item 8): Eject, Reload, Preset…, Draft model… and Serve are in a Model menu and
are Tab stops on the toolbar; Ctrl+R reloads; Tab walks through no dashboard widget that cannot show focus
(its plots take no keys)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QToolBar, QToolButton, QWidget

pytestmark = pytest.mark.gui

MODEL_ACTIONS = ["Reload", "Eject", "Preset…", "Draft model…", "Serve"]


def menu_items(window, title: str) -> list[str]:
    for action in window.menuBar().actions():
        if action.text().replace("&", "") == title and action.menu() is not None:
            return [a.text().replace("&", "") for a in action.menu().actions() if not a.isSeparator()]
    raise AssertionError(f"no {title} menu")


def test_the_model_actions_are_in_a_model_menu(window) -> None:
    assert menu_items(window, "Model") == MODEL_ACTIONS


def test_the_toolbar_buttons_are_tab_stops(window, qtbot) -> None:
    toolbar = window.findChild(QToolBar, "model_toolbar")
    reached: set[str] = set()
    window.model_combo.setFocus()
    qtbot.waitUntil(window.model_combo.hasFocus)
    for _ in range(80):  # Tab through the window, noting each toolbar button the focus lands on
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        focused = QApplication.focusWidget()
        if isinstance(focused, QToolButton) and focused.parentWidget() is toolbar:
            reached.add(focused.defaultAction().text().replace("&", ""))
    for name in MODEL_ACTIONS:
        button = toolbar.widgetForAction(next(a for a in toolbar.actions() if a.text().replace("&", "") == name))
        if button.isEnabled():
            assert name in reached, f"{name} is no Tab stop"
        assert button.focusPolicy() & Qt.FocusPolicy.TabFocus, name


def test_ctrl_r_reloads(window, qtbot) -> None:
    from app.engine import protocol as P

    window.session.model_path = "/models/fake-Q4_K_M.gguf"
    window.model_manager.update_actions()
    sent = window.engine.client.sent
    before = len(sent)
    qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    loads = [c for c in sent[before:] if isinstance(c, P.Load)]
    assert [c.config.model_path for c in loads] == ["/models/fake-Q4_K_M.gguf"]


def test_no_dashboard_tab_stop_without_a_visible_focus(window) -> None:
    import pyqtgraph as pg

    plots = window.dock.findChildren(pg.PlotWidget)
    assert plots
    for plot in plots:
        for widget in (plot, plot.viewport()):
            assert isinstance(widget, QWidget)
            assert not widget.focusPolicy() & Qt.FocusPolicy.TabFocus
