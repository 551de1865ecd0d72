"""The toolbar's model selector box: its closed face shows the chosen item's text in the fullest form that
fits — "name — 241.4 MiB · Q4_K_M · CPU only", then without the verdict, the quant, the size — and only
elides the bare name when even that is too long, so it never shows a number cut in half ("— 2"). The popup
lists whole lines, as before (app/ui/model_bar/tips.py); hovering the box shows the whole line when its face
leaves a part out, above the item's own tooltip (its path and the recommendation)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QHelpEvent, QPaintEvent
from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox, QStylePainter, QToolTip

from app.ui.toolkit.safe_text import tooltip_html
from app.ui.toolkit.whole_parts_label import dropping_parts

SUMMARY_SEP = " — "


def text_forms(text: str) -> list[str]:
    """`text`, then shorter: the summary after " — " loses its last " · " part first, then goes."""
    name, sep, summary = text.partition(SUMMARY_SEP)
    if not sep:
        return [text]
    return [f"{name}{SUMMARY_SEP}{form}" for form in dropping_parts(summary)] + [name]


class FittedCombo(QComboBox):
    """Asks for the chosen item's whole text where the toolbar has room, and goes down to its minimum
    contents length (the bare name, elided) where it has not."""

    def __init__(self) -> None:
        super().__init__()
        self.currentIndexChanged.connect(lambda _i: self.updateGeometry())
        self.model().dataChanged.connect(lambda *_: self.updateGeometry())  # a summary added to an item

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()  # its minimum contents length and the box's chrome
        chrome = hint.width() - self.fontMetrics().horizontalAdvance("x" * self.minimumContentsLength())
        wanted = self.fontMetrics().horizontalAdvance(self.currentText()) + max(0, chrome) + 4
        return QSize(max(hint.width(), wanted), hint.height())

    def minimumSizeHint(self) -> QSize:
        return super().sizeHint()

    def shown_text(self) -> str:
        """What the closed box shows of the chosen item at its width now."""
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        return self._fit(opt)

    def face_tooltip(self) -> str:
        """The chosen item's whole line when the face leaves a part of it out, then the item's own tooltip."""
        whole = self.currentText()
        tips = [tooltip_html(whole)] if self.shown_text() != whole else []
        item_tip = self.itemData(self.currentIndex(), Qt.ItemDataRole.ToolTipRole)
        if isinstance(item_tip, str) and item_tip:
            tips.append(item_tip)  # (already made safe: app/ui/model_bar/selector.py, tips.py)
        return "".join(tips)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent) and not self.toolTip():
            tip = self.face_tooltip()
            if tip:
                QToolTip.showText(event.globalPos(), tip, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def _fit(self, opt: QStyleOptionComboBox) -> str:
        field = self.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                            QStyle.SubControl.SC_ComboBoxEditField, self)
        room = field.width() - 2  # the style's own text margin
        metrics = self.fontMetrics()
        forms = text_forms(opt.currentText)
        for form in forms:
            if metrics.horizontalAdvance(form) <= room:
                return form
        return metrics.elidedText(forms[-1], Qt.TextElideMode.ElideRight, max(0, room))

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.isEditable():
            super().paintEvent(event)
            return
        painter = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        opt.currentText = self._fit(opt)
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)
