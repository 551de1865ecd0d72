"""What the model selector says about each model: a line with its size, quantization and fit verdict for this
machine after the name, and a tooltip with the quantization and context Roofline recommends, and why (one
sentence, from `app.core.models.fit.selector_advice`). Computed in the background from headers and cached
probes only; the items change when the answer arrives."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QComboBox

from app.ui.toolkit.background import run_in_background
from app.ui.toolkit.safe_text import tooltip_html

LABEL_ROLE = Qt.ItemDataRole.UserRole + 1  # the item's own label, before the summary is added


@dataclass
class Annotations:
    advice: dict[str, str] = field(default_factory=dict)  # path -> recommendation sentence
    summaries: dict[str, str] = field(default_factory=dict)  # path -> "253.0 MiB · Q4_K_M · CPU only"


def annotate_paths(paths: list[str]) -> Annotations:
    """Advice and summaries for the files that can be read (none at all if the machine cannot be assessed)."""
    from app.core.models.fit import assess_models, machine_for_library, selector_advice, selector_summary
    from app.core.models.library import describe

    models = [describe(Path(p), "library") for p in paths]
    out = Annotations()
    try:
        machine = machine_for_library()
    except Exception:  # noqa: BLE001 - advice is optional: never break the selector
        return out
    infos: dict[str, Any] = {str(m.path): m.info for m in models if m.info is not None and not m.broken}
    try:  # each model's advice for the threads its own load would use (its preset or tune result)
        for path, info in infos.items():
            out.advice.update(selector_advice({path: info}, machine_for_library(path)))
        fits = assess_models(models, machine)
    except Exception:  # noqa: BLE001
        fits = {}
    for m in models:
        if m.broken is None and m.info is not None:
            out.summaries[str(m.path)] = selector_summary(m.size, m.quant, fits.get(str(m.path)))
    return out


def advise(paths: list[str]) -> dict[str, str]:
    """path -> the recommendation sentence, for the files that can be read."""
    return annotate_paths(paths).advice


class ModelTips(QObject):
    """Keeps one combo box's items: the file path and the recommendation as tooltip, the summary after the name."""

    def __init__(self, combo: QComboBox):
        super().__init__(combo)
        self.combo = combo
        self.advice: dict[str, str] = {}
        self.summaries: dict[str, str] = {}
        self.pending = False

    def refresh(self) -> None:
        paths = [self.combo.itemData(i) for i in range(self.combo.count())]
        paths = [p for p in paths if isinstance(p, str) and p.endswith(".gguf")]
        self.pending = True
        run_in_background(self, lambda: annotate_paths(paths), self._apply, name="model-tips")

    def _apply(self, found: Annotations) -> None:
        self.pending = False
        self.advice, self.summaries = found.advice, found.summaries
        for i in range(self.combo.count()):
            path = self.combo.itemData(i)
            if not isinstance(path, str):
                continue
            if path in found.advice:
                # a file name or a model's own name can hold markup: shown literally, never as rich text
                self.combo.setItemData(i, tooltip_html(f"{path}\n{found.advice[path]}"), Qt.ItemDataRole.ToolTipRole)
            if found.summaries.get(path):
                label = self.combo.itemData(i, LABEL_ROLE) or self.combo.itemText(i)
                self.combo.setItemData(i, label, LABEL_ROLE)
                self.combo.setItemText(i, f"{label} — {found.summaries[path]}")
        view = self.combo.view()
        view.setMinimumWidth(view.sizeHintForColumn(0) + 24)  # the popup shows whole lines, the combo elides


def annotate(combo: QComboBox) -> ModelTips:
    """Start (or restart) the advice for the combo's current items; one ModelTips per combo."""
    tips = combo.findChild(ModelTips)
    if tips is None:
        tips = ModelTips(combo)
    tips.refresh()
    return tips
