"""The menu bar and its standard shortcuts (Ctrl+N, Ctrl+,, Ctrl+F, Ctrl+Q) and the View ▸ Theme switch,
remembered in the settings. Runs on the fake engine: no model process."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QPalette

from app.core.chat.store import ChatStore
from app.core.config import settings as settings_mod
from app.core.config.settings import Settings
from fake_window import make_window

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def _system_theme_after():
    yield
    from app.ui.toolkit import theme

    theme.set_choice("system")  # the palette is the application's: leave it as the next test expects
    app = QGuiApplication.instance()
    assert isinstance(app, QGuiApplication)
    theme.apply_system_scheme(app)


def menu_titles(win) -> list[str]:
    return [a.text().replace("&", "") for a in win.menuBar().actions()]


def shortcut_of(win, text: str) -> str:
    for menu_action in win.menuBar().actions():
        menu = menu_action.menu()
        for action in menu.actions() if menu else []:
            if action.text().replace("&", "").rstrip("…") == text:
                return action.shortcut().toString(QKeySequence.SequenceFormat.PortableText)
    raise AssertionError(f"no menu item {text!r}")


def test_menu_bar_has_the_standard_shortcuts(window) -> None:
    assert menu_titles(window)[:3] == ["File", "Edit", "View"]
    assert shortcut_of(window, "New chat") == "Ctrl+N"
    assert shortcut_of(window, "Settings") == "Ctrl+,"
    assert shortcut_of(window, "Quit") == "Ctrl+Q"
    assert shortcut_of(window, "Find chats") == "Ctrl+F"


def test_ctrl_f_goes_to_the_chat_search_from_another_page(window, qtbot) -> None:
    window.pages.setCurrentWidget(window.lab_page)
    window.conversations.search.setText("old words")
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.pages.currentWidget() is window.chat_page
    qtbot.waitUntil(window.conversations.search.hasFocus)
    assert window.conversations.search.selectedText() == "old words"


def test_ctrl_n_starts_a_new_chat(window, qtbot) -> None:
    window.new_chat()
    first = window.session.conversation
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.session.conversation is not None and first is not None
    assert window.session.conversation.id != first.id


def test_ctrl_comma_opens_settings(window, qtbot, monkeypatch) -> None:
    from app.ui.settings.dialog import SettingsDialog

    opened: list[bool] = []
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: opened.append(True) or 0)
    qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    assert opened == [True]


def window_is_dark() -> bool:
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


def test_theme_switch_recolours_now_and_is_remembered(window) -> None:
    from app.ui.toolkit import theme

    assert not window_is_dark()  # the offscreen platform's palette is light
    window.menus.theme_actions["dark"].trigger()
    assert window_is_dark() and theme.is_dark()
    assert theme.colors().dark
    assert settings_mod.load_settings().settings.window.theme == "dark"
    window.menus.theme_actions["light"].trigger()
    assert not window_is_dark() and not theme.is_dark()
    window.menus.theme_actions["dark"].trigger()
    window.menus.theme_actions["system"].trigger()  # back to the system's (light) palette
    assert not window_is_dark()
    assert settings_mod.load_settings().settings.window.theme == "system"


def test_saved_theme_applies_at_start(qtbot, tmp_path: Path) -> None:

    settings = Settings()
    settings.window.theme = "dark"
    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store, settings=settings)
    try:
        assert window_is_dark()
        assert win.menus.theme_actions["dark"].isChecked()
    finally:
        win.close()
        store.close()
        from app.ui.toolkit import theme

        theme.set_choice("system")
        app = QGuiApplication.instance()
        assert isinstance(app, QGuiApplication)
        theme.apply_system_scheme(app)


def test_ctrl_q_closes_the_window(window, qtbot) -> None:
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5_000)
