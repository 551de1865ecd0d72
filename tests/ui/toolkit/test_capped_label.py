"""The banner's label shows at most its lines at its width: text that fits is shown as it is, longer text as
its first lines with the last one elided, each line within the width, and expanded it shows everything."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtGui import QFont, QFontMetrics

from app.ui.toolkit.capped_label import CappedLabel, capped_text

pytestmark = pytest.mark.gui

LONG = ("A tiny demo base model: its replies will be odd. For chat, Models ▸ Discover recommends instruct models "
        "for this machine (its list works offline).")


@pytest.mark.parametrize("width", [60, 120, 200, 320, 2000])
@pytest.mark.parametrize("text", [LONG, "short", "one\ntwo\nthree\nfour", LONG + "\n\n" + LONG, ""])
def test_capped_text_fits_its_lines(qapp: Any, width: int, text: str) -> None:
    font = QFont()
    fm = QFontMetrics(font)
    shown = capped_text(text, font, width, 3)
    lines = shown.split("\n")
    if shown == text:  # it fits as it is: no more lines than allowed once wrapped
        assert fm.boundingRect(0, 0, width, 10_000, 0x1000, text).height() <= 3 * fm.lineSpacing() + 1
    else:
        assert len(lines) <= 3
        assert all(fm.horizontalAdvance(line) <= width for line in lines), lines
        words, shown_words = text.split(), shown.split()
        if lines[-1].endswith("…"):  # the rest is elided: what is shown is how the text starts
            assert shown_words[:-1] == words[:len(shown_words) - 1]
        else:  # the rest fitted on the last line, its line breaks as spaces: every word is shown
            assert shown_words == words


def test_the_label_folds_and_unfolds(qtbot: Any) -> None:
    label = CappedLabel(3)
    qtbot.addWidget(label)
    label.resize(200, 200)
    label.show()
    label.set_full_text(LONG)
    assert label.is_cut() and label.text() != LONG and len(label.text().split("\n")) == 3
    label.set_expanded(True)
    assert not label.is_cut() and label.text() == LONG == label.full_text()
    label.set_expanded(False)
    label.resize(3000, 200)  # wide enough: nothing to fold
    assert not label.is_cut() and label.text() == LONG
