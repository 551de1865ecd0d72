"""The Lab's comma-separated number fields (prompt lengths, answer lengths, KV depths, n_ubatch values).

Parsing says in one sentence which entry is wrong and what is expected, and the check runs as the user
types, with the reason shown under the fields, so a typo never reaches the sweep as a Python error.
"""

from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QWidget

from app.ui.toolkit import theme


def parse_lengths(text: str) -> list[int]:
    """`"64, 128"` → `[64, 128]`; a ValueError whose message names the bad entry otherwise."""
    values: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if not part.isdigit():
            raise ValueError(f"“{part}” is not a whole number: use numbers separated by commas, e.g. 64,128")
        values.append(int(part))
    return values


class LengthFieldsCheck:
    """Checks the named fields as they change and shows the first problem in a label under the form."""

    def __init__(self, form: QFormLayout, fields: dict[str, QLineEdit]) -> None:
        self.fields = fields
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.hide()
        form.addRow("", self.message)
        for edit in fields.values():
            edit.textChanged.connect(self.check)

    def problem(self) -> str | None:
        """The first visible field's problem as "<field>: <reason>", or None when all parse."""
        for name, edit in self.fields.items():
            if not _shown(edit):
                continue
            try:
                parse_lengths(edit.text())
            except ValueError as exc:
                return f"{name}: {exc}"
        return None

    def check(self) -> None:
        """Mark the wrong field and say why, in the theme's warning colour (`check` again after a theme switch)."""
        text = self.problem()
        warn = theme.colors().warn
        for edit in self.fields.values():
            bad = text is not None and _shown(edit) and text.startswith(self._name_of(edit) + ":")
            edit.setStyleSheet(f"border: 1px solid {warn};" if bad else "")
        self.message.setStyleSheet(f"color: {warn};")
        self.message.setText(text or "")
        self.message.setVisible(text is not None)

    def _name_of(self, edit: QLineEdit) -> str:
        return next(name for name, e in self.fields.items() if e is edit)


def _shown(widget: QWidget) -> bool:
    return not widget.isHidden()
