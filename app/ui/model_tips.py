"""The model selector's tooltips: which quantization and context Roofline recommends for each model, and why
(one sentence, from `app.core.library_fit.selector_advice`). Computed in the background from headers and
cached probes only; the tooltips change when the answer arrives."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QComboBox

from app.ui.background import run_in_background
from app.ui.safe_text import tooltip_html


def advise(paths: list[str]) -> dict[str, str]:
    """path -> the recommendation sentence, for the files that can be read (no advice at all if it fails)."""
    from app.core.gguf_info import inspect_gguf
    from app.core.library_fit import machine_for_library, selector_advice

    infos: dict[str, Any] = {}
    for p in paths:
        try:
            infos[p] = inspect_gguf(p)
        except Exception:  # noqa: BLE001, S112 - a missing or broken file simply gets no advice
            continue
    try:  # each model's advice for the threads its own load would use (its preset or tune result)
        advice: dict[str, str] = {}
        for path, info in infos.items():
            advice.update(selector_advice({path: info}, machine_for_library(path)))
        return advice
    except Exception:  # noqa: BLE001 - advice is optional: never break the selector
        return {}


class ModelTips(QObject):
    """Keeps one combo box's tooltips: the file path, then the recommendation once it is known."""

    def __init__(self, combo: QComboBox):
        super().__init__(combo)
        self.combo = combo
        self.advice: dict[str, str] = {}

    def refresh(self) -> None:
        paths = [self.combo.itemData(i) for i in range(self.combo.count())]
        paths = [p for p in paths if isinstance(p, str) and p.endswith(".gguf")]
        run_in_background(self, lambda: advise(paths), self._apply, name="model-tips")

    def _apply(self, advice: dict[str, str]) -> None:
        self.advice = advice
        for i in range(self.combo.count()):
            path = self.combo.itemData(i)
            if isinstance(path, str) and path in advice:
                # a file name or a model's own name can hold markup: shown literally, never as rich text
                self.combo.setItemData(i, tooltip_html(f"{path}\n{advice[path]}"), Qt.ItemDataRole.ToolTipRole)


def annotate(combo: QComboBox) -> ModelTips:
    """Start (or restart) the advice for the combo's current items; one ModelTips per combo."""
    tips = combo.findChild(ModelTips)
    if tips is None:
        tips = ModelTips(combo)
    tips.refresh()
    return tips
