"""A visible keyboard focus on lists, multi-line text fields, scroll areas and push buttons.

The Fusion style marks a focused line edit or button, but draws a text edit's or a list's frame the same with
the focus as without it, so a keyboard user could not see when the chat list, the system prompt or the message
box had it. These get a border in the theme's focus colour while they hold the focus; without it the border is
the theme's quiet one and 1 px thinner, its room taken by padding, so nothing inside moves when the focus comes.
Views drawn without a frame (the conversation, a message's text) keep their look: `quiet=False` makes the border
transparent until the focus comes (2 px either way, so nothing moves then either).

Fusion also draws a default push button (Send) the same with the focus as without it: `FocusRingButton` draws a
ring in the focus colour just inside the button's outline while it has the focus.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QAbstractScrollArea, QPushButton

from app.ui.toolkit import theme

FRAMED = "focusFrame"  # the property that marks a framed widget: the scroll areas inside it (a plot) keep their look


def focus_frame_css(colors: theme.Colors, quiet: bool = True) -> str:
    """The style sheet of a framed widget: a quiet border (`quiet`; else an invisible one), the focus colour's
    (thicker than the quiet one) while it has the focus."""
    framed = f'QAbstractScrollArea[{FRAMED}="true"]'
    if not quiet:
        return (f"{framed} {{ border: 2px solid transparent; border-radius: 3px; }}"
                f"{framed}:focus {{ border: 2px solid {colors.focus}; }}")
    return (f"{framed} {{ border: 1px solid {colors.border}; border-radius: 3px; padding: 1px; }}"
            f"{framed}:focus {{ border: 2px solid {colors.focus}; padding: 0px; }}")


def show_focus(*widgets: QAbstractScrollArea, quiet: bool = True, base_css: str = "") -> None:
    """Give `widgets` the focus border in the theme's colours of the moment (again after a theme switch);
    `base_css`: the widgets' own style sheet, kept before it."""
    css = base_css + focus_frame_css(theme.colors(), quiet)
    for widget in widgets:
        widget.setProperty(FRAMED, True)
        widget.setStyleSheet(css)


class FocusRingButton(QPushButton):
    """A push button with a ring in the theme's focus colour inside its outline while it has the keyboard focus."""

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self.hasFocus():
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor(theme.colors().focus), 2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        # just inside the style's outline (pixels 1 and 2 from the edge), over the button's face: the outline of a
        # default button is already in a blue close to the focus colour, the face is not
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(2, 2, -2, -2), 2, 2)
        painter.end()
