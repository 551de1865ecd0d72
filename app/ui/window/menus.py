"""The window's menu bar, with the shortcuts desktop users expect (File: New chat Ctrl+N, Settings Ctrl+,,
Quit Ctrl+Q; Edit: Find chats Ctrl+F; View: the dashboard and a System/Light/Dark theme, saved in the settings;
Model: Reload Ctrl+R, Eject, Preset…, Draft model…, Serve)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QToolBar, QToolButton

from app.ui.toolkit import theme

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

THEME_NAMES = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


class WindowMenus:
    """Builds the menu bar of `win` and keeps the actions others use (the toolbar shows Settings too)."""

    def __init__(self, win: MainWindow):
        self.win = win
        bar = win.menuBar()
        file_menu = bar.addMenu("&File")
        self.new_chat = self._action("&New chat", "Ctrl+N", win.new_chat)
        self.settings = self._action("&Settings…", "Ctrl+,", win.open_settings)
        self.quit = self._action("&Quit", "Ctrl+Q", win.close)
        # Every desktop app quits on Ctrl+Q, whichever of its windows (a dialog too) has the focus.
        self.quit.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        # win.exports and win.conversations exist once the window is built: looked up when triggered
        self.export_chat = self._action("&Export chat…", "Ctrl+Shift+E", lambda: win.exports.export_current())
        self.trash = QAction("&Trash…", win)
        self.trash.triggered.connect(lambda: win.conversations.open_trash())
        file_menu.addActions([self.new_chat, self.export_chat, self.trash, self.settings])
        file_menu.addSeparator()
        file_menu.addAction(self.quit)
        edit_menu = bar.addMenu("&Edit")
        self.find_chats = self._action("&Find chats", "Ctrl+F", self.focus_search)
        edit_menu.addAction(self.find_chats)
        view_menu = bar.addMenu("&View")
        view_menu.addAction(win.dashboard_action)
        theme_menu = view_menu.addMenu("&Theme")
        self.theme_group = QActionGroup(win)
        self.theme_actions: dict[str, QAction] = {}
        for choice, name in THEME_NAMES.items():
            action = QAction(name, win, checkable=True)
            action.triggered.connect(lambda _checked=False, c=choice: win_set_theme(win, c))
            self.theme_group.addAction(action)
            theme_menu.addAction(action)
            self.theme_actions[choice] = action
        self.theme_actions.get(win.settings.window.theme, self.theme_actions["system"]).setChecked(True)
        theme.set_choice(win.settings.window.theme)

    def _action(self, text: str, keys: str, slot: object) -> QAction:
        action = QAction(text, self.win)
        action.setShortcut(QKeySequence(keys))
        action.triggered.connect(slot)
        self.win.addAction(action)  # shortcuts work with the menu bar hidden (a native menu bar) too
        return action

    def add_model_menu(self, toolbar: QToolBar) -> None:
        """A Model menu with the toolbar's model actions (Reload Ctrl+R, Eject, Preset…, Draft model…, Serve),
        and each toolbar button a Tab stop: keyboard users reach all of them both ways. Called once the
        toolbar holds its actions; the menu's items are the same actions, enabled and checked as they are."""
        win = self.win
        model_menu = win.menuBar().addMenu("&Model")
        manager = win.model_manager
        manager.reload_action.setShortcut(QKeySequence("Ctrl+R"))
        # mnemonics as in the other menus (the toolbar's buttons show the same texts without the "&")
        for action, text in ((manager.reload_action, "&Reload"), (manager.eject_action, "E&ject"),
                             (win.preset_action, "&Preset…"), (win.draft_action, "&Draft model…"),
                             (win.serve_switch.action, "&Serve")):
            action.setText(text)
        win.addAction(manager.reload_action)
        model_menu.addActions([manager.reload_action, manager.eject_action])
        model_menu.addSeparator()
        model_menu.addActions([win.preset_action, win.draft_action])
        model_menu.addSeparator()
        model_menu.addAction(win.serve_switch.action)
        for action in toolbar.actions():
            button = toolbar.widgetForAction(action)
            if isinstance(button, QToolButton):
                button.setFocusPolicy(Qt.FocusPolicy.TabFocus)

    def focus_search(self) -> None:
        """Ctrl+F: to the chat search, from any page, with its text selected to type over."""
        win = self.win
        win.pages.setCurrentWidget(win.chat_page)
        search = win.conversations.search
        search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        search.selectAll()


def win_set_theme(win: MainWindow, choice: str) -> None:
    """Switch the theme now and remember it."""
    theme.set_choice(choice)
    win.settings.window.theme = "light" if choice == "light" else "dark" if choice == "dark" else "system"
    menus = getattr(win, "menus", None)
    if menus is not None and choice in menus.theme_actions:
        menus.theme_actions[choice].setChecked(True)
    win.restyle()
    win.save_settings()
