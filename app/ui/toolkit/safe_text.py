"""Text from users, models, model files and servers is shown as text, never interpreted as markup.

QLabel's default (`Qt.AutoText`) and every tooltip treat a string that looks like HTML as rich text, and
Qt's rich-text engine loads `<img src=…>` by itself: an error message holding `<img src="/dev/zero">` made
the window abort. Labels that can show such text are switched to `Qt.PlainText`; tooltips (which have no
format switch) get the text escaped inside a `<p>` that keeps its line breaks.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    """A QLabel that shows `text` literally, whatever it contains."""
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    return label


def make_plain(*labels: QLabel) -> None:
    for label in labels:
        label.setTextFormat(Qt.TextFormat.PlainText)


def tooltip_html(text: str) -> str:
    """A tooltip string that shows `text` literally (tooltips pick rich text by sniffing the string)."""
    if not text:
        return ""
    return "<p style='white-space:pre-wrap'>" + html.escape(text) + "</p>"


def set_plain_tooltip(widget: QWidget, text: str) -> None:
    widget.setToolTip(tooltip_html(text))
