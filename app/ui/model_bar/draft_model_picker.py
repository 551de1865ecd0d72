"""'Draft model…': pick a small model from the library to draft for the loaded one (speculative decoding).

Only a model whose vocabulary matches the loaded model's (tokenizer, token list, merges, BOS/EOS, compared from
the GGUF headers by app.core.gguf.vocabulary, the same check `roofline chat --draft-model` makes) can be chosen;
every other library model is listed greyed out with the reason. A model not smaller than the loaded one can
be chosen but is marked: drafting with it can only be slower. The headers are read off the GUI thread.

Self-contained: the window opens it with the loaded model's path (app.ui.model_bar.draft_model_action) and, when it is
accepted, loads with `draft_model = dialog.selected_path()` and `draft_max = dialog.draft_max()`, or without a
draft model when `turned_off` (the "No draft model" button, offered while one is in use: `current`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.files.untrusted import clean_text
from app.core.gguf.vocabulary import draft_candidates
from app.core.metrics.phase import fmt_bytes
from app.core.models.library import list_models
from app.ui.toolkit.background import run_in_background


@dataclass(frozen=True)
class DraftOption:
    path: str
    size: int
    problem: str | None  # why it cannot draft for the loaded model; None: it can
    larger: bool = False  # not smaller than the loaded model: allowed, but it cannot speed it up

    @property
    def usable(self) -> bool:
        return self.problem is None


def library_paths() -> list[str]:
    """Every readable GGUF in the library (broken files are left out: the library page says why)."""
    return [str(m.path) for m in list_models() if not m.broken]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def check_options(main_path: str, paths: list[str]) -> list[DraftOption]:
    """The library's models as draft options for `main_path`: usable ones first, smallest first."""
    main_size = _size(main_path)
    options = [DraftOption(p, _size(p), problem, larger=problem is None and _size(p) >= main_size > 0)
               for p, problem in draft_candidates(main_path, paths)]
    return sorted(options, key=lambda o: (not o.usable, o.larger, o.size, o.path))


def status_line(main_path: str, options: list[DraftOption]) -> str:
    """What the picker found, counting the library's models other than the loaded one (listed too, greyed out):
    "None of the library's 1 models shares…" said of a library that holds only the loaded model."""
    main = os.path.abspath(main_path)
    others = [o for o in options if os.path.abspath(o.path) != main]
    usable = sum(o.usable for o in others)
    if not others:
        return "The library has no other models. Download or import a small model of the same family first."
    if usable == 0:
        which = ("The library's one other model does not share" if len(others) == 1
                 else f"None of the library's {len(others)} other models shares")
        return f"{which} this model's vocabulary (a draft must come from the same family, e.g. a 0.5B beside a 7B)."
    if len(others) == 1:
        return "The library's one other model can draft for this model."
    return f"{usable} of {len(others)} library models can draft for this model."


class DraftPickerDialog(QDialog):
    ROLE = Qt.ItemDataRole.UserRole

    def __init__(self, main_model: str | Path, parent: QWidget | None = None, draft_max: int = 8,
                 candidates: Callable[[], list[str]] = library_paths, current: str | None = None):
        super().__init__(parent)
        self.setWindowTitle("Draft model")
        self.main_model = str(main_model)
        self.current = current  # the draft model in use, selected when the list arrives
        self.turned_off = False
        self.options: list[DraftOption] = []
        self.ready = False
        intro = QLabel(f"A small model that shares the vocabulary of {clean_text(Path(self.main_model).name)} "
                       "drafts a few tokens at a time; the loaded model checks them in one batch, so the text "
                       "is the same and only the speed changes.")
        intro.setWordWrap(True)
        self.status = QLabel("Checking the library's models…")
        self.status.setWordWrap(True)
        self.list = QListWidget()
        self.list.itemSelectionChanged.connect(self._selection_changed)
        self.list.itemDoubleClicked.connect(lambda _item: self.accept() if self.selected_path() else None)
        self.max = QSpinBox()
        self.max.setRange(1, 64)  # the same range as `roofline chat --draft-max`
        self.max.setValue(draft_max)
        self.max.setToolTip("Most tokens the draft model proposes per step")
        form = QFormLayout()
        form.addRow("Draft tokens per step", self.max)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setEnabled(False)
        if current is not None:
            off = self.buttons.addButton("No draft model", QDialogButtonBox.ButtonRole.ResetRole)
            off.setToolTip("Reload the model without a draft model")
            off.clicked.connect(self._turn_off)
        layout = QVBoxLayout(self)
        for w in (intro, self.status, self.list):
            layout.addWidget(w)
        layout.addLayout(form)
        layout.addWidget(self.buttons)
        self.resize(560, 420)
        main = self.main_model
        self._job = run_in_background(self, lambda: check_options(main, candidates()), self._show, self._failed,
                                      name="draft-picker")

    def _show(self, options: list[DraftOption]) -> None:
        self.options = options
        self.list.clear()
        for o in options:
            name = clean_text(Path(o.path).name)  # file names are untrusted text
            if o.usable:
                text = f"{name}  ({fmt_bytes(o.size)})" + ("  — not smaller than the loaded model: slower" if o.larger
                                                          else "")
            else:
                text = f"{name}  — {clean_text(o.problem or '')}"
            item = QListWidgetItem(text)
            item.setData(self.ROLE, o.path)
            item.setToolTip(clean_text(o.path) if o.usable else clean_text(f"Cannot draft: {o.problem}"))
            if not o.usable:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled & ~Qt.ItemFlag.ItemIsSelectable)
            self.list.addItem(item)
        self.status.setText(status_line(self.main_model, options))
        for i in range(self.list.count()):
            item = self.list.item(i)
            if self.current is not None and item.data(self.ROLE) == self.current \
                    and item.flags() & Qt.ItemFlag.ItemIsEnabled:
                self.list.setCurrentItem(item)
        self.ready = True

    def _turn_off(self) -> None:
        self.turned_off = True
        self.accept()

    def _failed(self, exc: BaseException) -> None:
        self.status.setText(clean_text(f"Could not read the library: {exc}"))
        self.ready = True

    def _selection_changed(self) -> None:
        self.ok.setEnabled(self.selected_path() is not None)

    def selected_path(self) -> str | None:
        items = self.list.selectedItems()
        if not items or not items[0].flags() & Qt.ItemFlag.ItemIsEnabled:
            return None
        path = items[0].data(self.ROLE)
        return str(path) if path else None

    def draft_max(self) -> int:
        return int(self.max.value())
