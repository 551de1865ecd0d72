"""The one-line label that drops whole " · " parts instead of cutting its text: what it shows at a width, its
size hints (those of its forms, not of what it shows), and the one case it elides (a single part too wide)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from app.ui.toolkit.whole_parts_label import MIN_SHORT_WIDTH, WholePartsLabel, dropping_parts

TEXT = "alpha · beta 1234 · gamma delta"


def _label(qtbot, text: str = TEXT) -> WholePartsLabel:
    label = WholePartsLabel(text)
    qtbot.addWidget(label)
    label.show()
    return label


def _width_for(label: WholePartsLabel, text: str) -> int:
    return label.fontMetrics().horizontalAdvance(text) + label.sizeHint().width() - \
        label.fontMetrics().horizontalAdvance(label.full_text())


def test_dropping_parts_goes_from_the_end() -> None:
    assert dropping_parts(TEXT) == [TEXT, "alpha · beta 1234", "alpha"]
    assert dropping_parts("one") == ["one"]


def test_it_shows_the_fullest_form_that_fits(qtbot) -> None:
    label = _label(qtbot)
    for form in dropping_parts(TEXT):
        label.resize(_width_for(label, form), label.height())
        QApplication.processEvents()
        assert label.text() == form
        label.resize(_width_for(label, form) + 3, label.height())  # a little more room: still that form
        QApplication.processEvents()
        assert label.text() == form


def test_its_hints_are_its_forms_not_what_it_shows(qtbot) -> None:
    label = _label(qtbot)
    full, short = label.sizeHint().width(), label.minimumSizeHint().width()
    label.resize(short, label.height())
    QApplication.processEvents()
    assert label.text() == "alpha"
    assert (label.sizeHint().width(), label.minimumSizeHint().width()) == (full, short)
    assert short == _width_for(label, "alpha") < full


def test_set_forms_and_the_last_resort(qtbot) -> None:
    label = _label(qtbot)
    label.set_forms(["x = 12345 and more", "x = 12345"])
    label.resize(_width_for(label, "x = 12345"), label.height())
    QApplication.processEvents()
    assert label.text() == "x = 12345" and label.full_text() == "x = 12345 and more"
    long_name = "w" * 200  # one part, wider than any toolbar gives it: elided, its minimum bounded
    label.setText(long_name)
    assert label.minimumSizeHint().width() <= MIN_SHORT_WIDTH + 40
    label.resize(100, label.height())
    QApplication.processEvents()
    assert label.text().endswith("…") and label.fontMetrics().horizontalAdvance(label.text()) <= 100
