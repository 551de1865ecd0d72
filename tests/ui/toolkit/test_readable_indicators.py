"""Check boxes on the dark theme (View ▸ Theme ▸ Dark): Fusion drew them as a near-black square with no visible
edge on the dark window, so the sampling panel's "fixed" seed and "Prompt lookup" could not be seen. The edge
must now stand out from the window (WCAG's 3:1 for the parts of a control), and the light theme keep its look."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QVBoxLayout, QWidget

from app.ui.toolkit import theme
from contrast import NON_TEXT_CONTRAST, contrast_ratio

pytestmark = pytest.mark.gui


def edge_contrast(box: QCheckBox) -> float:
    """The strongest contrast between the indicator's outline (its right edge, halfway down) and the window
    colour just outside it, between the box and its text."""
    from PySide6.QtWidgets import QStyle, QStyleOptionButton

    opt = QStyleOptionButton()
    box.initStyleOption(opt)
    ind = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)
    image = box.grab().toImage()
    y = ind.center().y()
    outside = QColor(image.pixel(ind.right() + 2, y))
    return max(contrast_ratio(QColor(image.pixel(ind.right() - dx, y)), outside) for dx in range(3))


@pytest.mark.usefixtures("system_theme_after")
def test_a_check_box_has_a_visible_edge_in_dark_and_its_own_look_in_light(qtbot: Any, qapp: Any) -> None:
    from PySide6.QtWidgets import QStyleFactory

    holder = QWidget()
    lay = QVBoxLayout(holder)
    box, plain = QCheckBox("fixed"), QCheckBox("fixed")
    plain_style = QStyleFactory.create(qapp.style().name())  # the style as it comes, for the light comparison
    plain.setStyle(plain_style)
    lay.addWidget(box)
    lay.addWidget(plain)
    qtbot.addWidget(holder)
    holder.show()
    qtbot.waitExposed(holder)
    for choice in ("dark", "light", "dark"):
        theme.set_choice(choice)
        theme.apply_system_scheme(qapp)
        qapp.processEvents()  # the new palette reaches the widgets shown already
        for checked in (False, True):
            box.setChecked(checked)
            plain.setChecked(checked)
            if choice == "dark":
                assert edge_contrast(box) >= NON_TEXT_CONTRAST, checked
            else:  # the light theme keeps the style's own check box, pixel for pixel
                assert box.grab().toImage() == plain.grab().toImage(), checked
