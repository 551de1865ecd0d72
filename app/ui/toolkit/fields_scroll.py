"""A dialog's fields in a scroll area, so that the dialog keeps its size and its buttons their place while the
fields' help lines change.

Why: a word-wrapped help line under a field (Settings' context line) is re-worded as the field changes; laid out
directly in a top-level dialog, each new line count changed the dialog's minimum size, so the dialog jumped (and
OK with it), while the label itself was given the height of its old text and lost its last lines (Qt does not
size a window by height-for-width). In a scroll area the fields are laid out height-for-width at the viewport's
width — every wrapped line gets the height its whole text needs — and a taller text scrolls instead of resizing
the window.

The area asks for its fields' whole size, not the few lines QScrollArea asks for by default, so the dialog opens
showing all of them where the screen has the room (`fit_to_screen`).
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QFrame, QScrollArea, QStyle, QWidget


class FieldsScroll(QScrollArea):
    def __init__(self, fields: QWidget, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidget(fields)

    def sizeHint(self) -> QSize:
        """The fields' whole size as they prefer it, and room for a vertical scroll bar.

        Not their height-for-width: asking a QFormLayout for its height at another width than it has overwrites
        the row heights it lays out with (Qt keeps one set), and a wrapped line was then given the height of
        its text at that other width."""
        fields = self.widget()
        if fields is None:
            return super().sizeHint()
        hint = fields.sizeHint()
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None, self)
        frame = 2 * self.frameWidth()
        return QSize(hint.width() + bar + frame, hint.height() + frame)


def fit_to_screen(dialog: QWidget) -> None:
    """Open `dialog` at its whole size where its screen has room for it, else as large as the screen allows (its
    fields scroll). Set once: what the fields say later never resizes it."""
    room = dialog.screen().availableGeometry().size()
    dialog.resize(dialog.sizeHint().boundedTo(room))
