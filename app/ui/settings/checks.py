"""The Settings dialog's fields checked as the user types, each reason in red under its field, and OK
disabled while one stands (the Lab's length fields do the same: app/ui/lab/length_fields.py).

A spin box silently refuses or reverts what it cannot hold ("1" in Context size becomes the old value when
the field loses focus), so the text being typed is checked here and its range said in words; choices that
only clash together (a quantized KV cache with flash attention off, a micro-batch above the batch) and a
models folder that is a file are said at once too, not at OK.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from app.ui.toolkit import theme
from app.ui.toolkit.wrapped_label import WrappedLabel


def spin_problem(spin: QSpinBox | QDoubleSpinBox) -> str | None:
    """Why the text typed in `spin` is not a value it holds, or None."""
    edit = spin.lineEdit()
    if edit is None:
        return None
    text = edit.text()
    if spin.specialValueText() and text == spin.specialValueText():  # "auto": the lowest value, in words
        return None
    state = spin.validate(text, edit.cursorPosition())[0]
    if state == QValidator.State.Acceptable:
        return None
    lo, hi = spin.minimum(), spin.maximum()
    special = spin.specialValueText()
    if isinstance(spin, QDoubleSpinBox):
        span = f"a number from {lo:.{spin.decimals()}f} to {hi:.{spin.decimals()}f}"
    else:
        span = f"a whole number from {lo} to {hi}"
    if special:
        span += f" (the lowest, {lo}, means {special})"
    return f"Not a value this field takes: {span}."


def folder_problem(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    if "\x00" in text:
        return "A folder name cannot contain a NUL character."
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        return f"“{path}” is a file, not a folder."
    return None


class SettingsChecks:
    """Adds a hidden reason label under each checked field of `form`; `ok` is enabled only when none shows."""

    def __init__(self, ok: QPushButton | None) -> None:
        self.ok = ok
        self.labels: dict[QWidget, QLabel] = {}
        self.rules: list[tuple[QWidget, Callable[[], str | None]]] = []

    def _label_under(self, form: QFormLayout, field: QWidget) -> QLabel:
        if field in self.labels:  # a second check on the field: its reasons share one label
            return self.labels[field]
        label = WrappedLabel()  # as tall as its whole reason (app/ui/toolkit/wrapped_label.py)
        label.hide()
        row = self._row_of(form, field)
        form.insertRow(row + 1, "", label)
        self.labels[field] = label
        self.restyle()
        return label

    @staticmethod
    def _row_of(form: QFormLayout, field: QWidget) -> int:
        """The form row holding `field`, directly or inside a row layout (Models folder + Browse)."""
        for row in range(form.rowCount()):
            item = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            if item is None:
                continue
            inner = item.layout()
            if item.widget() is field or (inner is not None and inner.indexOf(field) >= 0):
                return row
        raise ValueError("the field is not in this form")

    def restyle(self) -> None:
        """The reasons in the theme's red (again after a theme switch: the dialog calls it)."""
        style = f"color: {theme.colors().warn};"
        for label in self.labels.values():
            label.setStyleSheet(style)

    def spin(self, form: QFormLayout, spin: QSpinBox | QDoubleSpinBox) -> None:
        self._label_under(form, spin)
        self.rules.append((spin, lambda: spin_problem(spin)))
        edit = spin.lineEdit()
        if edit is not None:
            edit.textChanged.connect(self.check)
        spin.valueChanged.connect(self.check)

    def folder(self, form: QFormLayout, edit: QLineEdit) -> None:
        self._label_under(form, edit)
        self.rules.append((edit, lambda: folder_problem(edit.text())))
        edit.textChanged.connect(self.check)

    def rule(self, form: QFormLayout, field: QWidget, problem: Callable[[], str | None], *sources: QWidget) -> None:
        """A check over several fields, its reason under `field`; re-run when any of `sources` changes."""
        self._label_under(form, field)
        self.rules.append((field, problem))
        for source in sources:
            if isinstance(source, QComboBox):
                source.currentIndexChanged.connect(self.check)
            elif isinstance(source, (QSpinBox, QDoubleSpinBox)):
                source.valueChanged.connect(self.check)

    def problems(self) -> dict[QWidget, str]:
        found: dict[QWidget, str] = {}
        for field, problem in self.rules:
            text = problem()
            if text and field not in found:
                found[field] = text
        return found

    def check(self) -> None:
        found = self.problems()
        for field, label in self.labels.items():
            text = found.get(field, "")
            label.setText(text)
            label.setVisible(bool(text))
        if self.ok is not None:
            self.ok.setEnabled(not found)
            self.ok.setToolTip(" ".join(found.values()))
