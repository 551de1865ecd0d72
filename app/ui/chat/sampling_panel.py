"""System prompt and sampling controls (temperature, top-p, top-k, min-p, repeat penalty, max tokens, seed)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import SamplingDefaults
from app.engine import protocol as P

FIELD_MIN_WIDTH = 64  # px: narrower than the largest value (a seed has 10 digits); the text scrolls


def _dspin(lo: float, hi: float, step: float, decimals: int, tip: str) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    box.setToolTip(tip)
    return box


def _ispin(lo: int, hi: int, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setToolTip(tip)
    return box


class SamplingPanel(QWidget):
    changed = Signal()
    system_prompt_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 0, 6, 6)
        sys_box = QGroupBox("System prompt")
        sys_lay = QVBoxLayout(sys_box)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("Optional instructions for this chat")
        self.system_prompt.setTabChangesFocus(True)  # Tab moves on, as in every other field of the panel
        self.system_prompt.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 12)
        self.system_prompt.textChanged.connect(
            lambda: self.system_prompt_changed.emit(self.system_prompt.toPlainText()))
        sys_lay.addWidget(self.system_prompt)
        lay.addWidget(sys_box)
        self.system_box = sys_box

        box = QGroupBox("Sampling")
        form = QFormLayout(box)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a narrow sidebar: fields under labels
        self.temperature = _dspin(0.0, 5.0, 0.05, 2, "Randomness; 0 picks the most likely token every time")
        self.top_p = _dspin(0.0, 1.0, 0.01, 2, "Nucleus: keep the smallest set of tokens with this total probability")
        self.top_k = _ispin(0, 100_000, "Keep only the k most likely tokens (0: off)")
        self.min_p = _dspin(0.0, 1.0, 0.01, 2, "Drop tokens less likely than min-p × the best token")
        self.repeat_penalty = _dspin(0.0, 5.0, 0.05, 2, "Penalise recently used tokens (1.0: off)")
        self.max_tokens = _ispin(1, 1_000_000, "Stop after this many generated tokens")
        seed_row = QHBoxLayout()
        self.seed_fixed = QCheckBox("fixed")
        self.seed_fixed.setToolTip("A fixed seed makes replies repeatable")
        self.seed = _ispin(0, 2**31 - 1, "Random seed")
        self.seed_fixed.toggled.connect(self.seed.setEnabled)
        seed_row.addWidget(self.seed_fixed)
        seed_row.addWidget(self.seed, 1)
        for field in (self.temperature, self.top_p, self.top_k, self.min_p, self.repeat_penalty, self.max_tokens,
                      self.seed):
            field.setMinimumWidth(FIELD_MIN_WIDTH)  # not as wide as the largest value: the sidebar is narrow
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repeat penalty", self.repeat_penalty)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("Seed", seed_row)
        self.prompt_lookup = QCheckBox("Prompt lookup")
        self.prompt_lookup.setToolTip(
            "Speculative decoding without a draft model: drafts tokens by copying from the conversation and "
            "checks them in one batch. Helps when the reply repeats its input (editing code); can be slower "
            "otherwise: the dashboard shows the acceptance rate.")
        form.addRow(self.prompt_lookup)
        reset = QPushButton("Reset to defaults")
        reset.clicked.connect(lambda: self.set_values(SamplingDefaults()))
        form.addRow(reset)
        lay.addWidget(box)
        note = QLabel("Settings apply to the next reply.")
        note.setWordWrap(True)
        lay.addWidget(note)
        lay.addStretch(1)
        for w in (self.temperature, self.top_p, self.min_p, self.repeat_penalty):
            w.valueChanged.connect(self.changed)
        for s in (self.top_k, self.max_tokens, self.seed):
            s.valueChanged.connect(self.changed)
        self.seed_fixed.toggled.connect(self.changed)
        self.set_values(SamplingDefaults())

    def set_values(self, d: SamplingDefaults) -> None:
        self.temperature.setValue(d.temperature)
        self.top_p.setValue(d.top_p)
        self.top_k.setValue(d.top_k)
        self.min_p.setValue(d.min_p)
        self.repeat_penalty.setValue(d.repeat_penalty)
        self.max_tokens.setValue(d.max_tokens)
        self.seed_fixed.setChecked(d.seed is not None)
        self.seed.setEnabled(d.seed is not None)
        self.seed.setValue(d.seed or 0)

    def values(self) -> SamplingDefaults:
        return SamplingDefaults(
            temperature=self.temperature.value(), top_p=self.top_p.value(), top_k=self.top_k.value(),
            min_p=self.min_p.value(), repeat_penalty=self.repeat_penalty.value(),
            max_tokens=self.max_tokens.value(), seed=self.seed.value() if self.seed_fixed.isChecked() else None)

    def sampling(self) -> P.Sampling:
        v = self.values()
        return P.Sampling(temperature=v.temperature, top_p=v.top_p, top_k=v.top_k, min_p=v.min_p,
                          repeat_penalty=v.repeat_penalty, max_tokens=v.max_tokens, seed=v.seed)
