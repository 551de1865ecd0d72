"""Colours outside the chat follow View ▸ Theme too: the dashboard's "Why slow?" line and its empty plots' hints,
a Lab field's error, the Connect dialog's warning, a Settings field's reason and the Models page's quiet text and
verdicts were fixed colours chosen for a light background (reds at about 2.8:1 and an amber at 3.5:1 on the dark
theme, greys at 3.6:1 on the light one). Each is checked for the WCAG AA text contrast against what is drawn
behind it, in the theme the window starts in and again after a switch."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from app.core.bench.zoo import zoo_path
from app.core.metrics.phase import PhaseMetrics
from app.core.predict.reply_check import expected
from app.engine import protocol as P
from app.ui.engine_link.remote_dialog import RemoteDialog
from app.ui.models_page.library_columns import VERDICT_ROLES
from app.ui.models_page.table_cells import BADGE_ROLES
from app.ui.settings.dialog import SettingsDialog
from app.ui.toolkit import theme
from chat_drive import send, tokens
from contrast import TEXT_CONTRAST, assert_readable, contrast_ratio
from fake_engine import loaded_event
from fake_window import open_models_page

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("system_theme_after")]

SWITCHES = [("light", "dark"), ("dark", "light")]


def _switch_theme(win: Any, name: str) -> None:
    """View ▸ Theme ▸ `name`; the new palette reaches the widgets in posted events, as the window goes on."""
    win.menus.theme_actions[name].trigger()
    QApplication.processEvents()


def _slow_reply(win: Any) -> None:
    """A reply decoding at 0.4× the speed model's prediction for the loaded model: the slow line explains it."""
    info, rates, cfg = win.dashboard.slow_line._model
    m = PhaseMetrics(prompt_tokens=40, prefill_tokens=40, prefill_ms=1.0, decode_tokens=64, generated_tokens=65)
    decode, prefill = expected(info, rates, cfg, m)
    m.decode_ms, m.prefill_ms = 1000.0 * 64 / (decode * 0.4), 1000.0 * 40 / prefill
    rid = send(win, "why so slow?")
    tokens(win, rid, "Because")
    win.engine._dispatch(P.Done(rid, "Because", "length", m.to_dict()))


@pytest.mark.parametrize("first, second", SWITCHES)
def test_the_dashboards_slow_line_and_empty_plots(window, qtbot, tmp_path: Path, first: str, second: str) -> None:
    window.show()
    model = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    window.engine._dispatch(dataclasses.replace(loaded_event(), model_path=str(model), n_ctx=4096, n_threads=2))
    qtbot.waitUntil(lambda: window.dashboard.slow_line._model is not None, timeout=15000)
    dash = window.dashboard
    _switch_theme(window, first)
    empty = dash.empty_labels[dash.plot_itl]  # "tokens appear here while a reply streams"
    assert_readable(empty, dash.plot_itl, f"an empty plot's hint, {first}")
    _slow_reply(window)
    line = dash.slow_line
    assert line.isVisibleTo(dash) and line.text().startswith("Why slow?")
    assert_readable(line, dash, f"the slow line, {first}")
    _switch_theme(window, second)
    assert_readable(line, dash, f"the slow line, after switching to {second}")
    window.new_chat()  # an empty chat: the plots show their hints again
    assert_readable(dash.empty_labels[dash.plot_prefill], dash.plot_prefill, f"an empty plot's hint, {second}")


@pytest.mark.parametrize("first, second", SWITCHES)
def test_a_lab_fields_error(window, qtbot, first: str, second: str) -> None:
    window.show()
    _switch_theme(window, first)
    window.pages.setCurrentWidget(window.lab_page)  # the Lab tab
    qtbot.waitUntil(lambda: window.lab_page.widget is not None)
    lab = window.lab_page.widget
    lab.prompts.setFocus()
    qtbot.keyClick(lab.prompts, Qt.Key.Key_End)
    qtbot.keyClicks(lab.prompts, ",12x")  # a typo
    message = lab.field_check.message
    assert message.isVisibleTo(lab) and "is not a whole number" in message.text()
    assert_readable(message, lab, f"a Lab field's error, {first}")
    _switch_theme(window, second)
    assert_readable(message, lab, f"a Lab field's error, after switching to {second}")


@pytest.mark.parametrize("first, second", SWITCHES)
def test_the_connect_dialogs_warning(window, qtbot, first: str, second: str) -> None:
    window.show()
    _switch_theme(window, first)
    dialog = RemoteDialog(window)  # Connect to a server…, left open while the theme changes
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.url.clear()
    buttons = dialog.findChild(QDialogButtonBox)
    assert buttons is not None
    ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
    qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)  # no URL: the dialog says what to enter
    assert dialog.warning.text().startswith("Enter a URL")
    assert_readable(dialog.warning, dialog, f"the Connect dialog's warning, {first}")
    _switch_theme(window, second)
    assert_readable(dialog.warning, dialog, f"the Connect dialog's warning, after switching to {second}")


@pytest.mark.parametrize("first, second", SWITCHES)
def test_a_settings_fields_reason(window, qtbot, first: str, second: str) -> None:
    _switch_theme(window, first)
    dialog = SettingsDialog(window.settings, window)  # File ▸ Settings…, left open while the theme changes
    qtbot.addWidget(dialog)
    dialog.show()
    edit = dialog.n_ctx.lineEdit()
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, "12")  # on its way to 128? the field takes 256 and up
    reason = dialog.checks.labels[dialog.n_ctx]
    assert reason.isVisible() and "256" in reason.text()
    assert_readable(reason, dialog, f"a Settings field's reason, {first}")
    _switch_theme(window, second)
    assert_readable(reason, dialog, f"a Settings field's reason, after switching to {second}")


@pytest.mark.parametrize("first, second", SWITCHES)
def test_the_models_pages_quiet_text(models_window, qtbot, first: str, second: str) -> None:
    _switch_theme(models_window, first)
    page = open_models_page(models_window, qtbot)
    tabs = page.tabs.tabBar()
    qtbot.mouseClick(tabs, Qt.MouseButton.LeftButton, pos=tabs.tabRect(1).center())  # Discover
    legend = page.discover_legend  # what the predictions are and how to read the quality column
    assert legend.isVisible()
    assert_readable(legend, page, f"Discover's legend, {first}")
    _switch_theme(models_window, second)
    assert_readable(legend, page, f"Discover's legend, after switching to {second}")
    page.set_search_status("cannot reach the model hub (ConnectError)", error=True)  # a search without a network
    assert_readable(page.search_status, page, f"a search's error, {second}")
    _switch_theme(models_window, first)
    assert_readable(page.search_status, page, f"a search's error, after switching to {first}")


@pytest.mark.parametrize("name", ["light", "dark"])
def test_the_model_tables_verdicts(window, name: str) -> None:
    """The Library's verdict text on the table's rows (plain and alternate) and the Discover badges' white text
    on their fills."""
    _switch_theme(window, name)
    palette, c = QApplication.palette(), theme.colors()
    for verdict, role in VERDICT_ROLES.items():
        for row in (QPalette.ColorRole.Base, QPalette.ColorRole.AlternateBase):
            ratio = contrast_ratio(QColor(getattr(c, role)), palette.color(row))
            assert ratio >= TEXT_CONTRAST, f"{verdict!r} on {palette.color(row).name()}: {ratio:.2f}:1"
    for badge, role in BADGE_ROLES.items():
        ratio = contrast_ratio(QColor("white"), QColor(theme.pill_fill(role)))
        assert ratio >= TEXT_CONTRAST, f"the {badge!r} badge: {ratio:.2f}:1"
