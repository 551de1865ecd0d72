"""Check boxes and radio buttons that can be seen on a dark palette.

Fusion outlines a check box in the window colour made darker, filled with the base colour: on the dark palette
(app.ui.toolkit.theme) that is a near-black square on a near-black window, so "fixed seed" or "Prompt lookup"
could not be told from the background. This proxy of the application's own style draws what the style draws and,
on a dark palette only, a border in the palette's placeholder-text grey around the indicator; the light themes
and every other control are left exactly as the style paints them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory, QStyleOption, QWidget

_INDICATORS = (QStyle.PrimitiveElement.PE_IndicatorCheckBox, QStyle.PrimitiveElement.PE_IndicatorRadioButton)


class ReadableIndicators(QProxyStyle):
    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter,  # noqa: N802 - Qt's name
                      widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element not in _INDICATORS or option.palette.color(QPalette.ColorRole.Window).lightness() >= 128:
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(option.palette.color(QPalette.ColorRole.PlaceholderText), 1))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.translate(0.5, 0.5)  # a 1 px line on pixel centres, as Fusion draws its own: crisp, not smeared
        rect = option.rect.adjusted(0, 0, -1, -1)
        if element == QStyle.PrimitiveElement.PE_IndicatorRadioButton:
            painter.drawEllipse(rect)
        else:
            painter.drawRect(rect)
        painter.restore()


def install(app: QApplication) -> None:
    """Wrap the application's Fusion style once (a fresh copy of it by name: the proxy owns its base style, and the
    application deletes the style it replaces)."""
    current = app.style()
    if isinstance(current, ReadableIndicators) or current.name().lower() != "fusion":
        return  # a platform's own style (Windows, macOS) draws its indicators for its own dark scheme
    base = QStyleFactory.create(current.name())
    if base is not None:
        app.setStyle(ReadableIndicators(base))
