"""The window's "Draft model…" action: pick a draft model for the loaded model
(app.ui.model_bar.draft_model_picker) and reload with it, or turn drafting off again.

The choice belongs to the model it was made for (the picker only offers models whose vocabulary matches that
one; a draft of another family would be refused at load): another model loads without it, and loading that
model again brings it back. It lives as long as the window (not saved); the load options reach the engine
through MainWindow.load_config, like every other (`load_kwargs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from app.ui.model_bar.draft_model_picker import DraftPickerDialog, library_paths

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


@dataclass(frozen=True)
class DraftChoice:
    model: str  # the model it drafts for
    draft_model: str
    draft_max: int


class DraftModelControl(QObject):
    def __init__(self, window: MainWindow, candidates: Callable[[], list[str]] = library_paths):
        super().__init__(window)
        self.window = window
        self.candidates = candidates  # the library's models (tests give their own)
        self.choice: DraftChoice | None = None
        self.dialog: DraftPickerDialog | None = None

    def load_kwargs(self, model: str | Path) -> dict[str, Any]:
        """LoadConfig's draft options for loading `model`: the chosen draft if it was chosen for this model."""
        if self.choice is None or self.choice.model != str(model):
            return {}
        return {"draft_model": self.choice.draft_model, "draft_max": self.choice.draft_max}

    def open_dialog(self) -> None:
        w = self.window
        model = w.session.model_path
        if not model or w.engine.remote is not None:
            w.banner.show_message("Load a local model first: a draft model drafts for the loaded model file.")
            return
        current = self.choice if self.choice is not None and self.choice.model == model else None
        dialog = DraftPickerDialog(model, w, draft_max=current.draft_max if current else 8,
                                   candidates=self.candidates, current=current.draft_model if current else None)
        dialog.accepted.connect(lambda: self._accepted(dialog, model))
        dialog.finished.connect(dialog.deleteLater)
        self.dialog = dialog
        dialog.open()  # window-modal without a nested event loop

    def _accepted(self, dialog: DraftPickerDialog, model: str) -> None:
        path = None if dialog.turned_off else dialog.selected_path()
        new = DraftChoice(model, path, dialog.draft_max()) if path else None
        if new == self.choice:
            return
        self.choice = new
        if self.window.session.model_path == model:
            self.window.load_model(Path(model))  # load_config now carries the draft (or no longer does)
