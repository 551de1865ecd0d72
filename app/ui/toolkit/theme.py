"""Colours shared by every widget: one colour per phase (prefill orange, decode blue) everywhere, defined in
app.charts.colors with the charts that use them too; light/dark taken from the system palette (Qt follows
the OS colour scheme; we re-read it on change) unless the user chose Light or Dark (View ▸ Theme, `set_choice`)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.charts.colors import DECODE, PREFILL, ROOF
from app.ui.toolkit import readable_indicators

__all__ = ["DECODE", "GOOD", "PREFILL", "ROOF", "WARN", "Colors", "apply_system_scheme", "colors", "dark_palette",
           "is_dark", "pill_fill", "set_choice"]

GOOD = "#137333"  # on light backgrounds; widgets that follow the theme take `colors().good`
WARN = "#c5221f"  # on light backgrounds; widgets that follow the theme take `colors().warn`
# The text roles on each theme's backgrounds, each at least 4.5:1 there, a dark tab page's lighter pane included
# (the light theme's take white text on them too: `pill_fill`)
_LIGHT_ROLES = {"muted": "#5f6368", "warn": WARN, "caution": "#975100", "good": GOOD, "info": "#1967d2"}
_DARK_ROLES = {"muted": "#aeb3b8", "warn": "#f28b82", "caution": "#fdd663", "good": "#81c995", "info": "#8ab4f8"}


_choice = "system"  # "system", "light" or "dark": View ▸ Theme
_forced = False  # the palette now shown was set for a forced choice, not by the system


def set_choice(choice: str) -> None:
    """Follow the system ("system") or force "light" / "dark"; `apply_system_scheme` makes the palette match."""
    global _choice
    _choice = choice if choice in ("light", "dark") else "system"
    hints = QGuiApplication.styleHints()
    if QGuiApplication.instance() is not None and hasattr(hints, "setColorScheme"):  # Qt 6.8+: native widgets too
        scheme = {"light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark}.get(_choice, Qt.ColorScheme.Unknown)
        hints.setColorScheme(scheme)


@dataclass
class Colors:
    dark: bool
    window: str
    base: str
    text: str
    muted: str
    border: str
    user_bg: str
    assistant_bg: str
    code_bg: str
    banner_bg: str
    banner_fg: str
    warn: str  # text that warns (a reply cut short, a wrong entry), readable on the window's backgrounds
    focus: str  # the border of a field or list that has the keyboard focus (app/ui/toolkit/focus_frame.py)
    caution: str  # amber text that is a hint, not an error (why a reply was slow, a model that partly fits)
    good: str  # green text for what works out (a model that fits the GPU)
    info: str  # blue text that informs (a model that runs on the CPU)


def is_dark() -> bool:
    if _choice != "system":
        return _choice == "dark"
    app = QGuiApplication.instance()
    if app is None:
        return False
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


def apply_system_scheme(app: QGuiApplication) -> None:
    """Make the palette match the system's colour scheme.

    Platform themes (Windows, macOS, GNOME/KDE) recolour the palette themselves; where Qt knows the scheme
    is dark but the palette stayed light (Fusion without a platform theme), switch to a dark palette. A theme
    the user chose wins over the system's.
    """
    global _forced
    scheme = QGuiApplication.styleHints().colorScheme()
    if _choice != "system":
        scheme = Qt.ColorScheme.Dark if _choice == "dark" else Qt.ColorScheme.Light
    light_palette = QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() >= 128
    if scheme == Qt.ColorScheme.Dark and light_palette:
        if isinstance(app, QApplication):  # our dark palette leaves Fusion's check boxes without a visible edge
            readable_indicators.install(app)
        app.setPalette(dark_palette())
        _forced = _choice != "system"
    elif scheme == Qt.ColorScheme.Light and not light_palette:
        # A forced Light on a dark system: the style's own light palette (an empty one is the system's dark)
        app.setPalette(_light_palette() if _choice == "light" else QPalette())
        _forced = _choice != "system"
    elif _forced and _choice == "system":  # back to the system's after a forced theme, even if it says nothing
        app.setPalette(QPalette())
        _forced = False


def _light_palette() -> QPalette:
    style = QApplication.style() if isinstance(QApplication.instance(), QApplication) else None
    return style.standardPalette() if style is not None else QPalette()


def dark_palette() -> QPalette:
    pal = QPalette()
    role = QPalette.ColorRole
    for r, color in ((role.Window, "#202124"), (role.WindowText, "#e8eaed"), (role.Base, "#171717"),
                     (role.AlternateBase, "#2a2b2e"), (role.Text, "#e8eaed"), (role.Button, "#2d2e31"),
                     (role.ButtonText, "#e8eaed"), (role.Highlight, "#1a73e8"), (role.HighlightedText, "#ffffff"),
                     (role.ToolTipBase, "#2d2e31"), (role.ToolTipText, "#e8eaed"), (role.PlaceholderText, "#9aa0a6"),
                     (role.Link, "#8ab4f8"), (role.Mid, "#3c4043"), (role.Dark, "#111111"),
                     (role.Light, "#3c4043")):
        pal.setColor(r, QColor(color))
    for r in (role.WindowText, role.Text, role.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, r, QColor("#6f7378"))
    return pal


def colors() -> Colors:
    pal = QGuiApplication.palette()
    dark = is_dark()
    text = pal.color(QPalette.ColorRole.WindowText).name()
    if dark:
        return Colors(True, pal.color(QPalette.ColorRole.Window).name(), pal.color(QPalette.ColorRole.Base).name(),
                      text, _DARK_ROLES["muted"], "#3c4043", "#1e3a5f", "#2a2b2e", "#202124", "#5c1a1a", "#f6aea9",
                      _DARK_ROLES["warn"], "#8ab4f8", _DARK_ROLES["caution"], _DARK_ROLES["good"], _DARK_ROLES["info"])
    return Colors(False, pal.color(QPalette.ColorRole.Window).name(), pal.color(QPalette.ColorRole.Base).name(),
                  text, _LIGHT_ROLES["muted"], "#dadce0", "#e8f0fe", "#f8f9fa", "#f1f3f4", "#fce8e6", "#a50e0e",
                  WARN, "#1a73e8", _LIGHT_ROLES["caution"], GOOD, _LIGHT_ROLES["info"])


def pill_fill(role: str) -> str:
    """The fill of a pill with white text in the colour of `role` (muted, warn, caution, good, info): the light
    theme's, dark enough for white text (4.5:1 or more) on either theme's background."""
    return _LIGHT_ROLES[role]
