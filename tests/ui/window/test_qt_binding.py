"""Guard against a broken Qt binding: PySide6 6.12.0 on Python 3.11 drops a reference to None on every
void method call (setPen, setText, processEvents...), so any window crashes with `none_dealloc` after a
few thousand paints. pyproject pins below 6.12; this test fails if a broken build comes back."""

from __future__ import annotations

import sys

from PySide6.QtGui import QColor, QImage, QPainter, QPen
from PySide6.QtWidgets import QLabel


def test_void_calls_keep_none_refcount(qapp):
    img = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(img)
    label = QLabel()
    pen = QPen(QColor("red"))
    before = sys.getrefcount(None)
    for _ in range(200):
        painter.setPen(pen)
        label.setText("x")
    after = sys.getrefcount(None)
    painter.end()
    assert after - before > -50, f"None lost {before - after} references in 400 void calls"
