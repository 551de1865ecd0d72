"""Colours shared by every widget: one colour per phase (prefill orange, decode blue) everywhere, and
light/dark taken from the system palette (Qt follows the OS colour scheme; we re-read it on change)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette

PREFILL = "#e8710a"  # orange: prompt processing (compute-bound)
DECODE = "#1a73e8"  # blue: token generation (memory-bound)
ROOF = "#7f8c8d"
GOOD = "#188038"
WARN = "#c5221f"


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


def is_dark() -> bool:
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


def colors() -> Colors:
    pal = QGuiApplication.palette()
    dark = is_dark()
    text = pal.color(QPalette.ColorRole.WindowText).name()
    if dark:
        return Colors(True, pal.color(QPalette.ColorRole.Window).name(), pal.color(QPalette.ColorRole.Base).name(),
                      text, "#9aa0a6", "#3c4043", "#1e3a5f", "#2a2b2e", "#202124", "#5c1a1a", "#f6aea9")
    return Colors(False, pal.color(QPalette.ColorRole.Window).name(), pal.color(QPalette.ColorRole.Base).name(),
                  text, "#5f6368", "#dadce0", "#e8f0fe", "#f8f9fa", "#f1f3f4", "#fce8e6", "#a50e0e")
