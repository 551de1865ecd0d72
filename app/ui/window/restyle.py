"""The window's colours after a theme change (View ▸ Theme, or the system's scheme): the palette first, then every
part that writes colours of its own (replies, banner, dashboard, the pages built so far, the focus borders)."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QScrollArea

from app.ui.toolkit import theme
from app.ui.toolkit.focus_frame import show_focus


def restyle_window(window: Any) -> None:
    app = QGuiApplication.instance()
    if isinstance(app, QGuiApplication):
        theme.apply_system_scheme(app)
    window.banner.restyle()
    window.message_view.restyle()
    window.context_meter.update()  # its warning colour
    show_focus(window.conversations.view, window.sampling_panel.system_prompt, window.input)
    show_focus(window.message_view, quiet=False)  # a Tab stop (the keys scroll the chat) drawn without a frame
    dashboard_scroll = window.dock.widget()
    if isinstance(dashboard_scroll, QScrollArea):  # a Tab stop (arrow keys scroll it) whose focus no style shows
        show_focus(dashboard_scroll)
    window.dashboard.restyle()
    # the Models and Lab pages are built on first visit (a later one starts in the theme of the moment)
    for page in (window.models_page, window.lab_page):
        page_restyle = getattr(page.widget, "restyle", None)
        if callable(page_restyle):
            page_restyle()
