"""Settings dialog: models directory, threads, context, GPU layers, KV cache type, flash attention,
batch sizes, the disk budget of saved chat caches, what happens when the context is full, default sampling.
Under the context and GPU-layers fields: what the choice costs in memory for the current model and the largest that fits
(`settings_memory`). Returns a new Settings; the caller saves it and reloads the model if engine settings
changed. A field the current model's preset also sets says so under it (the preset wins for that model),
and a context that does not fit the current model blocks OK as any other problem does.

The fields scroll above the buttons (app/ui/toolkit/fields_scroll.py): the lines under the context field change
with it and wrap to their whole text, and the dialog keeps its size and OK its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.config import paths
from app.core.config.defaults import CONTEXT_OVERFLOW_LABELS
from app.core.config.settings import MAX_THREADS, Settings
from app.core.gguf.kv_types import KV_TYPE_LABELS
from app.core.models.presets import preset_for
from app.ui.chat.sampling_panel import SamplingPanel
from app.ui.settings.checks import SettingsChecks
from app.ui.settings.context_speed import ContextSpeed
from app.ui.settings.memory import MemoryAdvisor
from app.ui.toolkit.fields_scroll import FieldsScroll, fit_to_screen
from app.ui.toolkit.wrapped_label import WrappedLabel

AUTO = -2  # spin-box value that means "auto"/"default"
NOTE_STYLE = "color: palette(placeholder-text);"


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent: QWidget | None = None, model_path: str | None = None,
                 usage: Any = None):
        super().__init__(parent)
        self.setWindowTitle("Roofline settings")
        self._base = settings
        fields = QWidget()
        lay = QVBoxLayout(fields)
        lay.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        row = QHBoxLayout()
        self.models_dir = QLineEdit(settings.models_dir or "")
        self.models_dir.setPlaceholderText(str(paths.default_models_dir()))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row.addWidget(self.models_dir, 1)
        row.addWidget(browse)
        form.addRow("Models folder", row)

        self.threads = QSpinBox()
        self.threads.setRange(0, MAX_THREADS)
        self.threads.setSpecialValueText("auto (physical cores)")
        self.threads.setValue(settings.threads or 0)
        form.addRow("Threads", self.threads)
        self.n_ctx = QSpinBox()
        self.n_ctx.setRange(256, 1 << 21)
        self.n_ctx.setSingleStep(1024)
        self.n_ctx.setValue(settings.n_ctx)
        self.n_ctx.setToolTip("Tokens the KV cache can hold; memory grows linearly with it")
        form.addRow("Context size", self.n_ctx)
        # the lines under the context field change with it: each as tall as its whole text (wrapped_label.py)
        self.ctx_cost = WrappedLabel()  # what this context costs for the current model, and the most that fits
        form.addRow("", self.ctx_cost)
        self.ctx_speed = WrappedLabel()  # decode speed as that context fills, and the chats' use of it
        form.addRow("", self.ctx_speed)
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(AUTO, 1000)
        self.gpu_layers.setSpecialValueText("auto (all, if the build can offload)")
        self.gpu_layers.setValue(AUTO if settings.n_gpu_layers is None else settings.n_gpu_layers)
        self.gpu_layers.setToolTip("-1: all layers; 0: CPU only")
        form.addRow("GPU layers", self.gpu_layers)
        self.cpu_moe = QSpinBox()
        self.cpu_moe.setRange(0, 4096)
        self.cpu_moe.setSpecialValueText("none")
        self.cpu_moe.setValue(settings.n_cpu_moe)
        self.cpu_moe.setToolTip("Mixture-of-experts models on a small GPU: keep the expert weights of the first N "
                                "blocks in RAM and put everything else on the GPU (llama.cpp's --n-cpu-moe)")
        form.addRow("MoE experts in RAM (blocks)", self.cpu_moe)
        self.gpu_cost = WrappedLabel()
        form.addRow("", self.gpu_cost)
        self.kv_type = QComboBox()
        for value, label in KV_TYPE_LABELS.items():
            self.kv_type.addItem(label, value)
        self.kv_type.setCurrentIndex(max(self.kv_type.findData(settings.kv_cache_type), 0))
        form.addRow("KV cache type", self.kv_type)
        self.flash = QComboBox()
        flash_choices: list[tuple[bool | None, str]] = [(None, "auto"), (True, "on"), (False, "off")]
        for flash_value, flash_label in flash_choices:
            self.flash.addItem(flash_label, flash_value)
        self.flash.setCurrentIndex([None, True, False].index(settings.flash_attn))
        self.flash.setToolTip("A quantized V cache needs flash attention")
        form.addRow("Flash attention", self.flash)
        self.n_batch = QSpinBox()
        self.n_batch.setRange(1, 1 << 16)
        self.n_batch.setValue(settings.n_batch)
        form.addRow("Batch size", self.n_batch)
        self.n_ubatch = QSpinBox()
        self.n_ubatch.setRange(1, 1 << 16)
        self.n_ubatch.setValue(settings.n_ubatch)
        form.addRow("Micro-batch size", self.n_ubatch)
        self.saved_kv = QSpinBox()
        self.saved_kv.setRange(0, 1 << 24)
        self.saved_kv.setSingleStep(256)
        self.saved_kv.setSuffix(" MiB")
        self.saved_kv.setSpecialValueText("off")
        self.saved_kv.setValue(settings.saved_kv_budget_mib)
        self.saved_kv.setToolTip("Chats' KV caches kept on disk, so reopening a long chat loads its cache instead "
                                 "of evaluating the whole chat again; the least recently used go first")
        form.addRow("Saved chat caches", self.saved_kv)
        self.overflow = QComboBox()
        for policy, policy_label in CONTEXT_OVERFLOW_LABELS.items():
            self.overflow.addItem(policy_label, policy)
        self.overflow.setCurrentIndex(max(self.overflow.findData(settings.context_overflow), 0))
        self.overflow.setToolTip(
            "When a chat no longer fits the context. Stop: the oldest turns are left out of the prompt and the "
            "reply ends when the context is full. Cut the middle: a prompt too long loses its middle (the start "
            "and the newest text stay). Roll: as cut, and during the reply the oldest tokens are forgotten so it "
            "goes on past the context size. A model's preset can choose its own.")
        form.addRow("When the context is full", self.overflow)
        lay.addLayout(form)
        lay.addWidget(QLabel("Default sampling for new replies:"))
        self.sampling = SamplingPanel()
        self.sampling.set_values(settings.sampling)
        self.sampling.system_box.hide()  # the system prompt belongs to each chat, not to the defaults
        lay.addWidget(self.sampling)
        outer = QVBoxLayout(self)
        outer.addWidget(FieldsScroll(fields), 1)
        self.warning = QLabel("")
        self.warning.setWordWrap(True)
        outer.addWidget(self.warning)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        outer.addWidget(buttons)
        self._result: Settings | None = None
        self.advisor = MemoryAdvisor.for_model(model_path)
        self.speed = ContextSpeed(model_path, usage)  # decode speed as the context fills; the chats' use
        self.threads.valueChanged.connect(self._show_costs)
        self.preset = preset_for(settings, model_path) if model_path else None
        self._check_as_typed(form, buttons)
        self._note_preset_wins(form, model_path)
        for spin in (self.n_ctx, self.gpu_layers):
            spin.valueChanged.connect(self._show_costs)
        self.kv_type.currentIndexChanged.connect(self._show_costs)
        self._show_costs()
        fit_to_screen(self)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed while the dialog is open
            self.checks.restyle()

    def _check_as_typed(self, form: QFormLayout, buttons: QDialogButtonBox) -> None:
        """Each field's problem under it as the user types; OK only when there is none (app/ui/settings/checks)."""
        self.checks = checks = SettingsChecks(buttons.button(QDialogButtonBox.StandardButton.Ok))
        checks.folder(form, self.models_dir)
        for spin in (self.threads, self.n_ctx, self.gpu_layers, self.n_batch, self.n_ubatch):
            checks.spin(form, spin)
        checks.rule(form, self.flash, lambda: "A quantized KV cache needs flash attention: choose auto or on."
                    if self.kv_type.currentData() != "f16" and self.flash.currentData() is False else None,
                    self.kv_type, self.flash)
        checks.rule(form, self.n_ctx, self._context_problem, self.n_ctx, self.kv_type, self.gpu_layers)
        checks.rule(form, self.n_ubatch, lambda: f"At most the batch size ({self.n_batch.value()})."
                    if self.n_ubatch.value() > self.n_batch.value() else None, self.n_batch, self.n_ubatch)
        p = self.sampling
        sampling_box = p.temperature.parentWidget()
        sampling_form = sampling_box.layout() if sampling_box is not None else None
        if isinstance(sampling_form, QFormLayout):
            for field in (p.temperature, p.top_p, p.top_k, p.min_p, p.repeat_penalty, p.max_tokens):
                checks.spin(sampling_form, field)
        checks.check()

    def _context_problem(self) -> str | None:
        """A context the advisor says does not fit the current model here blocks OK, unless that model's
        preset sets its own context (then this value is not what it loads with)."""
        if self.advisor is None or (self.preset is not None and self.preset.n_ctx is not None):
            return None
        ngl = None if self.gpu_layers.value() == AUTO else self.gpu_layers.value()
        return self.advisor.context_problem(self.n_ctx.value(), self.kv_type.currentData(), ngl)

    def _note_preset_wins(self, form: QFormLayout, model_path: str | None) -> None:
        """Under each field the current model's preset also sets: that the preset's value is the one used."""
        self.preset_notes: dict[QWidget, QLabel] = {}
        if self.preset is None or not model_path:
            return
        name = Path(model_path).name
        kv = self.preset.kv_cache_type
        fields: list[tuple[QWidget, object]] = [
            (self.threads, self.preset.threads), (self.n_ctx, self.preset.n_ctx),
            (self.gpu_layers, self.preset.n_gpu_layers), (self.cpu_moe, self.preset.n_cpu_moe),
            (self.kv_type, KV_TYPE_LABELS.get(kv, kv) if kv else None),
            (self.flash, None if self.preset.flash_attn is None else ("on" if self.preset.flash_attn else "off")),
            (self.overflow, CONTEXT_OVERFLOW_LABELS.get(self.preset.context_overflow or "")),
        ]
        for field, value in fields:
            if value is None:
                continue
            note = WrappedLabel(f"{name}'s preset sets {value}: that is what it loads with (Preset… to change it); "
                                "this value is for models without one.")
            note.setStyleSheet(NOTE_STYLE)
            form.insertRow(SettingsChecks._row_of(form, field) + 1, "", note)
            self.preset_notes[field] = note

    def _show_costs(self) -> None:
        if self.advisor is None:
            self.ctx_cost.setText("")
            self.gpu_cost.setText("")
            return
        ngl = None if self.gpu_layers.value() == AUTO else self.gpu_layers.value()
        args = (self.n_ctx.value(), self.kv_type.currentData(), ngl)
        self.ctx_cost.setText(self.advisor.context_text(*args))
        self.gpu_cost.setText(self.advisor.gpu_text(*args))
        self.ctx_speed.setText(self.speed.text(*args, threads=self.threads.value() or None))

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Models folder", self.models_dir.text() or
                                                str(paths.default_models_dir()))
        if path:
            self.models_dir.setText(path)

    def result_settings(self) -> Settings:
        """The edited settings (valid: built through the same pydantic model as the file)."""
        data = self._base.model_dump()
        data.update(
            models_dir=self.models_dir.text().strip() or None,
            threads=self.threads.value() or None,
            n_ctx=self.n_ctx.value(),
            n_gpu_layers=None if self.gpu_layers.value() == AUTO else self.gpu_layers.value(),
            n_cpu_moe=self.cpu_moe.value(),
            kv_cache_type=self.kv_type.currentData(),
            flash_attn=self.flash.currentData(),
            n_batch=self.n_batch.value(),
            n_ubatch=min(self.n_ubatch.value(), self.n_batch.value()),
            saved_kv_budget_mib=self.saved_kv.value(),
            context_overflow=self.overflow.currentData(),
            sampling=self.sampling.values().model_dump(),
        )
        return Settings.model_validate(data)

    def _accept(self) -> None:
        if self.kv_type.currentData() != "f16" and self.flash.currentData() is False:
            self.warning.setText("A quantized KV cache needs flash attention: choose auto or on.")
            return
        self._result = self.result_settings()
        self.accept()
