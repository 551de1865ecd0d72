"""The quantize dialog: pick a type and an output name, run the quantizer (its own child process) with
progress; Cancel stops it and deletes the partial file, and the dialog is ready for another try (so is it
after a failure, with the reason shown).

The job waits for its child on a background thread (`run_in_background`: the outcome is dropped if the
dialog is gone); progress events arrive on that thread and reach the dialog through a queued signal."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from app.core.config import paths
from app.core.gguf.quant_types import QUANTIZE_TARGETS
from app.core.metrics.phase import fmt_bytes
from app.engine.quantize_client import QuantizeJob
from app.ui.toolkit.background import run_in_background


class _QuantBridge(QObject):
    progressed = Signal(object)  # (event dict, fraction, bytes, stage, predicted bytes): quantizer's thread


class QuantizeDialog(QDialog):
    """Pick a type and output name, run the quantizer with progress; Cancel stops it and deletes the partial."""

    finished_ok = Signal(str)

    def __init__(self, source: Path, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Quantize model")
        self.setMinimumWidth(520)
        self.source = source
        self.job: Any = None
        self._bridge = _QuantBridge(self)
        self._bridge.progressed.connect(self._on_event)
        form = QFormLayout()
        form.addRow("Source", QLabel(source.name))
        self.type_box = QComboBox()
        self.type_box.addItems(QUANTIZE_TARGETS)
        self.type_box.setCurrentText("Q4_K_M")
        self.type_box.currentTextChanged.connect(self._suggest_name)
        form.addRow("Type", self.type_box)
        self.name_edit = QLineEdit()
        form.addRow("Output", self.name_edit)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox()
        self.start_btn = self.buttons.addButton("Quantize", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_btn = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.start_btn.clicked.connect(self.start)
        self.cancel_btn.clicked.connect(self.cancel)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        self._suggest_name(self.type_box.currentText())

    def _suggest_name(self, qtype: str) -> None:
        stem = re.sub(r"(?i)[-_.](f32|f16|bf16)$", "", self.source.stem)
        self.name_edit.setText(f"{stem}-{qtype}.gguf")

    def output_path(self) -> Path:
        return paths.models_dir() / "quantized" / self.name_edit.text().strip()

    def start(self) -> None:
        out = self.output_path()
        out.parent.mkdir(parents=True, exist_ok=True)
        self.job = QuantizeJob(self.source, out, self.type_box.currentText(),
                               on_event=lambda e, s: self._bridge.progressed.emit(
                                   (e, s.fraction, s.bytes, s.stage, s.predicted_bytes)))
        self._set_editable(False)
        self.status.setText("starting…")
        run_in_background(self, self.job.run, lambda path: self._on_finished(str(path), ""),
                          lambda exc: self._on_finished(None, str(exc)), name="quantize")

    def cancel(self) -> None:
        if self.job is not None and self.job.state.stage not in ("done", "failed", "cancelled"):
            self.job.cancel()
            self.status.setText("cancelling…")
        else:
            self.reject()

    def _on_event(self, payload: tuple[dict[str, Any], float, int, str, int]) -> None:
        event, fraction, nbytes, stage, predicted = payload
        self.progress.setValue(int(fraction * 1000))
        if event.get("event") == "verified":
            self.status.setText("the result loaded and generated text: OK")
        elif stage == "verifying":
            self.status.setText("checking that the result loads and generates…")
        else:
            expect = f" of ~{fmt_bytes(predicted)}" if predicted else ""
            self.status.setText(f"{stage}: {fmt_bytes(nbytes)}{expect} written")

    def _set_editable(self, editable: bool) -> None:
        for widget in (self.start_btn, self.type_box, self.name_edit):
            widget.setEnabled(editable)

    def _on_finished(self, path: str | None, message: str) -> None:
        if path:
            self.start_btn.setEnabled(False)
            self.cancel_btn.setText("Close")
            self.progress.setValue(1000)
            self.status.setText(f"done: {path}")
            self.finished_ok.emit(path)
        else:  # cancelled or failed: nothing was written, another type or name may be tried
            self.job = None  # Cancel closes the dialog now
            self._set_editable(True)
            self.progress.setValue(0)
            self.status.setText(message)
