"""Cell helpers for the Models page's tables: number formats, the verdict badge and the progress bar
delegates."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import (
    QApplication,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionProgressBar,
    QStyleOptionViewItem,
)

from app.ui.toolkit.theme import pill_fill

_Index = QModelIndex | QPersistentModelIndex

# the colour role of each badge; its white text is readable on the fill in either theme (theme.pill_fill)
BADGE_ROLES = {"full GPU": "good", "partial": "caution", "CPU": "info", "won't fit": "warn", "unknown": "muted"}


def fmt_rate(x: float) -> str:
    """Tokens/s with sensible precision: 1,234 · 45.6 · 3.21 · 0.42."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def fmt_params(n: int) -> str:
    if not n:
        return "?"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


# ---------------------------------------------------------------- background work


class ProgressDelegate(QStyledItemDelegate):
    """Draws the progress column as a progress bar."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        fraction = index.data(Qt.ItemDataRole.UserRole)
        if fraction is None:
            return super().paint(painter, option, index)
        bar = QStyleOptionProgressBar()
        bar.rect = option.rect.adjusted(2, 3, -2, -3)  # type: ignore[attr-defined]
        bar.minimum, bar.maximum = 0, 1000
        bar.progress = int(float(fraction) * 1000)
        bar.text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        bar.textVisible = True
        QApplication.style().drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter)


class BadgeDelegate(QStyledItemDelegate):
    """Draws the verdict as a coloured pill."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        verdict = index.data(Qt.ItemDataRole.UserRole)
        text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        if verdict is None or not text:
            return super().paint(painter, option, index)
        if option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
            painter.fillRect(option.rect, option.palette.highlight())  # type: ignore[attr-defined]
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = option.fontMetrics  # type: ignore[attr-defined]
        w = fm.horizontalAdvance(text) + 16
        r: QRect = option.rect  # type: ignore[attr-defined]
        pill = QRect(r.left() + 4, r.top() + 3, min(w, r.width() - 8), r.height() - 6)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(pill_fill(BADGE_ROLES.get(str(verdict), "muted"))))
        painter.drawRoundedRect(pill, pill.height() / 2, pill.height() / 2)
        painter.setPen(QColor("white"))
        painter.drawText(pill, int(Qt.AlignmentFlag.AlignCenter), text)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        s = super().sizeHint(option, index)
        return QSize(s.width() + 20, s.height())
