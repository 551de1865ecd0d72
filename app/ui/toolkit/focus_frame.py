"""A visible keyboard focus on lists and multi-line text fields.

The Fusion style marks a focused line edit or button, but draws a text edit's or a list's frame the same with
the focus as without it, so a keyboard user could not see when the chat list, the system prompt or the message
box had it. These get a border in the theme's focus colour while they hold the focus; without it the border is
the theme's quiet one and 1 px thinner, its room taken by padding, so nothing inside moves when the focus comes.
"""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractScrollArea

from app.ui.toolkit import theme

FRAMED = "focusFrame"  # the property that marks a framed widget: the scroll areas inside it (a plot) keep their look


def focus_frame_css(colors: theme.Colors) -> str:
    """The style sheet of a framed widget: a quiet border, the focus colour's (thicker) while it has the focus."""
    framed = f'QAbstractScrollArea[{FRAMED}="true"]'
    return (f"{framed} {{ border: 1px solid {colors.border}; border-radius: 3px; padding: 1px; }}"
            f"{framed}:focus {{ border: 2px solid {colors.focus}; padding: 0px; }}")


def show_focus(*widgets: QAbstractScrollArea) -> None:
    """Give `widgets` the focus border in the theme's colours of the moment (again after a theme switch)."""
    css = focus_frame_css(theme.colors())
    for widget in widgets:
        widget.setProperty(FRAMED, True)
        widget.setStyleSheet(css)
