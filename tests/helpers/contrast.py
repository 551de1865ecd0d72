"""Colours as a reader sees them: the WCAG 2 contrast ratio of two colours, the colours a widget or a chart draws
(the text colour its style sheet set, the background most of a grabbed area shows), and the fixture that puts
the system's theme back after a test switched it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import QWidget

TEXT_CONTRAST = 4.5  # WCAG 2 AA for body text
NON_TEXT_CONTRAST = 3.0  # WCAG 2 AA for the parts of a control (a focus border) against what they replace


def relative_luminance(color: QColor) -> float:
    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(color.redF()) + 0.7152 * linear(color.greenF()) + 0.0722 * linear(color.blueF())


def contrast_ratio(a: QColor, b: QColor) -> float:
    """From 1 (the same colour) to 21 (black on white)."""
    lighter, darker = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def text_color(widget: QWidget) -> QColor:
    """The colour `widget` writes its text in (its style sheet's `color`, once polished)."""
    widget.ensurePolished()
    return widget.palette().color(widget.foregroundRole())


def background_behind(widget: QWidget, ancestor: QWidget) -> QColor:
    """What `ancestor` paints behind `widget`: the colour most of `widget`'s area shows when `ancestor` is grabbed
    (a label's text covers a small part of it)."""
    area = QRect(widget.mapTo(ancestor, QPoint(0, 0)), widget.size())
    image = ancestor.grab(area).toImage()
    counts = Counter(image.pixel(x, y) for x in range(image.width()) for y in range(image.height()))
    return QColor.fromRgb(counts.most_common(1)[0][0])


@pytest.fixture
def system_theme_after() -> Iterator[None]:
    """Leave the application's palette as the next test expects (the system's) after a test that switched
    View ▸ Theme: the palette is the application's, not the window's."""
    yield
    from app.ui.toolkit import theme

    theme.set_choice("system")
    app = QGuiApplication.instance()
    assert isinstance(app, QGuiApplication)
    theme.apply_system_scheme(app)


def assert_readable(widget: QWidget, ancestor: QWidget, what: str) -> None:
    """`widget`'s text against what `ancestor` paints behind it: at least the WCAG AA ratio for text."""
    color, background = text_color(widget), background_behind(widget, ancestor)
    ratio = contrast_ratio(color, background)
    assert ratio >= TEXT_CONTRAST, f"{what}: {color.name()} on {background.name()} is {ratio:.2f}:1"


def label_color(label: Any) -> QColor:
    """The colour a pyqtgraph LabelItem writes in (its own, else pyqtgraph's foreground)."""
    import pyqtgraph as pg

    return pg.mkColor(label.opts.get("color") or pg.getConfigOption("foreground"))


def chart_text_colors(plot: Any) -> dict[str, QColor]:
    """The colour of each piece of text the chart draws: title, axes' ticks and labels, legend, bar labels."""
    import pyqtgraph as pg

    item = plot.getPlotItem()
    texts = {"title": label_color(item.titleLabel)}
    for name in ("left", "bottom"):
        texts[f"{name} axis"] = item.getAxis(name).textPen().color()
    if item.legend is not None:
        for i, (_sample, label) in enumerate(item.legend.items):
            texts[f"legend {i}"] = label_color(label)
    for i, text in enumerate(x for x in item.items if isinstance(x, pg.TextItem)):
        texts[f"bar label {i}"] = text.textItem.defaultTextColor()
    return texts
