"""The "Preset for this model" dialog: the settings one model file loads and chats with (app.core.models.presets).

Every field starts at "from settings" (not set: the settings' value applies); the sampling is the sampling
panel's current values, saved with the preset when asked. "Remove preset" deletes it; it is disabled while the
model has no preset (there is nothing to remove).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.config.defaults import CONTEXT_OVERFLOW_LABELS, CONTEXT_OVERFLOW_POLICIES
from app.core.config.settings import MAX_THREADS, ModelPreset, PresetSampling, SamplingDefaults, Settings
from app.core.gguf.kv_types import KV_TYPES
from app.core.models.presets import describe, preset_for, preset_key
from app.ui.settings.context_speed import ContextSpeed
from app.ui.toolkit.safe_text import tooltip_html

FROM_SETTINGS = "from settings"


def _spin(lo: int, hi: int, value: int | None, unset: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setSpecialValueText(FROM_SETTINGS)  # shown at the minimum, which means "not set"
    box.setValue(unset if value is None else value)
    return box


def _combo(choices: tuple[object, ...], value: object, labels: Mapping[Any, str] | None = None,
           unset: str = FROM_SETTINGS) -> QComboBox:
    """A choice with "from settings" first (not set); `labels` names the choices where their values are terse."""
    box = QComboBox()
    box.addItem(unset, None)
    for choice in choices:
        box.addItem((labels or {}).get(choice, str(choice)), choice)
    box.setCurrentIndex(max(box.findData(value), 0) if value is not None else 0)
    return box


class PresetDialog(QDialog):
    def __init__(self, settings: Settings, model: Path, sampling: SamplingDefaults, parent: QWidget | None = None,
                 usage: Any = None):
        super().__init__(parent)
        self.setWindowTitle(f"Preset for {model.name}")
        self.model = model
        self.sampling = sampling
        saved = preset_for(settings, model)
        preset = saved or ModelPreset()
        self.removed = False
        lay = QVBoxLayout(self)
        # The file's name (plain text: a file name is anyone's); the settings' key for it ("name:size") is
        # internal, and only the tooltip says that another size of the same name is another file.
        self.note = QLabel(f"Applied whenever this file ({model.name}) is chosen, here and in `roofline chat`; "
                           "command-line flags still win.")
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.setToolTip(tooltip_html(f"Kept for this file name and size (preset key {preset_key(model)}): a "
                                          "file of the same name but another size has a preset of its own."))
        lay.addWidget(self.note)
        form = QFormLayout()
        self.n_ctx = _spin(255, 1 << 21, preset.n_ctx, 255)
        self.gpu_layers = _spin(-2, 10_000, preset.n_gpu_layers, -2)
        self.gpu_layers.setToolTip("-1: every layer on the GPU")
        self.cpu_moe = _spin(-1, 4096, preset.n_cpu_moe, -1)
        self.cpu_moe.setToolTip("Mixture-of-experts models: keep the expert weights of the first N blocks in RAM "
                                "and put everything else on the GPU (llama.cpp's --n-cpu-moe); 0: none")
        self.threads = _spin(0, MAX_THREADS, preset.threads, 0)
        self.kv_type = _combo(KV_TYPES, preset.kv_cache_type)
        self.flash = _combo((True, False), preset.flash_attn)
        self.overflow = _combo(CONTEXT_OVERFLOW_POLICIES, preset.context_overflow, CONTEXT_OVERFLOW_LABELS,
                               f"{FROM_SETTINGS}: {CONTEXT_OVERFLOW_LABELS[settings.context_overflow]}")
        self.system_prompt = QPlainTextEdit(preset.system_prompt or "")
        self.system_prompt.setPlaceholderText("none (empty: not set)")
        self.system_prompt.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 12)
        self.template = QLineEdit(preset.chat_template or "")
        self.template.setPlaceholderText("the model's own (or a built-in name: chatml, llama3, gemma, …)")
        self.keep_sampling = QCheckBox("Save the sampling panel's current values with the preset")
        self.keep_sampling.setChecked(bool(preset.sampling.model_dump(exclude_none=True)))
        form.addRow("Context (tokens)", self.n_ctx)
        self._settings = settings
        self.speed = ContextSpeed(str(model), usage)  # decode speed as the context fills; the chats' use
        self.ctx_speed = QLabel("")
        self.ctx_speed.setWordWrap(True)
        form.addRow("", self.ctx_speed)
        form.addRow("GPU layers", self.gpu_layers)
        form.addRow("MoE experts in RAM (blocks)", self.cpu_moe)
        form.addRow("KV cache type", self.kv_type)
        form.addRow("Threads", self.threads)
        form.addRow("Flash attention", self.flash)
        form.addRow("When the context is full", self.overflow)
        form.addRow("System prompt", self.system_prompt)
        form.addRow("Chat template", self.template)
        form.addRow("", self.keep_sampling)
        lay.addLayout(form)
        self.current = QLabel("Now set: " + (", ".join(describe(preset)) or "nothing"))
        self.current.setWordWrap(True)
        lay.addWidget(self.current)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.remove_button = buttons.addButton("Remove preset", QDialogButtonBox.ButtonRole.DestructiveRole)
        self.remove_button.clicked.connect(self._remove)
        self.remove_button.setEnabled(saved is not None)
        self.remove_button.setToolTip("Delete this file's preset" if saved is not None else
                                      "This file has no preset yet: Save creates one")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        for spin in (self.n_ctx, self.gpu_layers, self.threads):
            spin.valueChanged.connect(self._show_speed)
        self.kv_type.currentIndexChanged.connect(self._show_speed)
        self._show_speed()

    def _show_speed(self) -> None:
        """The context's decode speed as it fills, for the values shown (unset ones: the settings')."""
        s = self._settings
        n_ctx = self.n_ctx.value() if self.n_ctx.value() != self.n_ctx.minimum() else s.n_ctx
        ngl = self.gpu_layers.value() if self.gpu_layers.value() != self.gpu_layers.minimum() else s.n_gpu_layers
        kv = self.kv_type.currentData() or s.kv_cache_type
        threads = (self.threads.value() or None) if self.threads.value() != self.threads.minimum() else s.threads
        self.ctx_speed.setText(self.speed.text(n_ctx, kv, ngl, threads))

    def _remove(self) -> None:
        self.removed = True
        self.accept()

    def result_preset(self) -> ModelPreset | None:
        """The edited preset (validated by the same model as the file), or None to remove it."""
        if self.removed:
            return None
        sampling = PresetSampling()
        if self.keep_sampling.isChecked():
            values = self.sampling.model_dump()
            values["seed"] = -1 if values["seed"] is None else values["seed"]  # "random" is a choice too
            sampling = PresetSampling(**values)
        return ModelPreset(
            n_ctx=self.n_ctx.value() if self.n_ctx.value() != self.n_ctx.minimum() else None,
            n_gpu_layers=self.gpu_layers.value() if self.gpu_layers.value() != self.gpu_layers.minimum() else None,
            n_cpu_moe=self.cpu_moe.value() if self.cpu_moe.value() != self.cpu_moe.minimum() else None,
            threads=self.threads.value() or None,
            kv_cache_type=self.kv_type.currentData(),
            flash_attn=self.flash.currentData(),
            context_overflow=self.overflow.currentData(),
            system_prompt=self.system_prompt.toPlainText() or None,
            chat_template=self.template.text().strip() or None,
            sampling=sampling)
