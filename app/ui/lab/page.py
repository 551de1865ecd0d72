"""The Lab page: run benchmark sweeps on this machine (or a remote server) and see which phase dominates.

Every sweep ends with a chart (app.charts.sweep_chart, the same one `roofline sweep --png` saves) and a
one-sentence finding computed from the data; the chart is drawn from the first measurement on, growing as
the points come. The charts follow the theme (`restyle`).

Where llama.cpp runs: in a measuring engine owned by the window's EngineQt (`EngineQt.measuring_engine`:
a second engine process, not the chat's, because a sweep reloads the model per configuration; see there),
or on a remote server through a RemoteClient. The sweep runs through `run_in_background` (result and failure
on the GUI thread, dropped once the page is gone); its progress, which that helper does not carry, goes
through the page's own queued signal under the same guard: an emit on a deleted page is dropped.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.charts.sweep_chart import KIND_TITLES, draw_result, make_plot, render_png
from app.core.bench.sweeps import KINDS, SweepResult, context_needed, plan, run_sweep
from app.core.models.default_model import default_model_path
from app.engine import protocol as P
from app.engine.client import EngineError
from app.engine.remote.backend import RemoteClient
from app.engine.sweep_backend import EngineSweepBackend, RemoteSweepBackend
from app.ui.dashboard.plots import empty_label, restyle_empty_label, restyle_plot
from app.ui.engine_link.engine_qt import EngineQt
from app.ui.lab.batch import BatchLabPanel
from app.ui.lab.length_fields import LengthFieldsCheck, parse_lengths
from app.ui.toolkit import theme
from app.ui.toolkit.background import BackgroundJob, run_in_background


class LabPage(QWidget):
    """Sweeps with progress and cancel. `finished(SweepResult)` / `failed(str)` for the window and tests."""

    progressed = Signal(int, int, str)
    partial = Signal(object)  # SweepResult of the measurements so far
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, model_path: str | None = None, parent: QWidget | None = None,
                 engine: EngineQt | None = None) -> None:
        super().__init__(parent)
        self.model_path = model_path
        # The owner of the measuring engine: the window's (so its shutdown closes a sweep's engine too), or,
        # for a page on its own, a handle of the page's whose chat engine is never started.
        self.engine = engine if engine is not None else EngineQt(self)
        self.result: SweepResult | None = None
        self.shown: SweepResult | None = None  # what the chart shows: the finished result or the points so far
        self._job: BackgroundJob | None = None
        self._cancel = threading.Event()
        self.load_overrides: dict[str, Any] = {}  # e.g. the tuned threads/n_ubatch, set by the window

        self.kind = QComboBox()
        for k in KINDS:
            self.kind.addItem(KIND_TITLES[k], k)
        self.kind.addItem("Batching: decode tok/s with 1–16 concurrent streams", "batch")
        self.batch_lab = BatchLabPanel()  # its own controls and plots (app.ui.lab.batch)
        self.batch_lab.base_provider = self._batch_base
        self.prompts = QLineEdit("64,128,256,512,1024")
        self.gens = QLineEdit("32,128")
        self.depths = QLineEdit("0,256,512,1024,2048")
        self.ubatches = QLineEdit("32,64,128,256,512")
        self.reps = QSpinBox()
        self.reps.setRange(1, 20)
        self.reps.setValue(3)
        self.remote = QLineEdit()
        self.remote.setPlaceholderText("optional: OpenAI-compatible server URL (grid only; client-side timing)")
        form = QFormLayout()
        form.addRow("Sweep", self.kind)
        form.addRow("Prompt lengths", self.prompts)
        form.addRow("Answer lengths", self.gens)
        form.addRow("KV depths", self.depths)
        form.addRow("n_ubatch values", self.ubatches)
        form.addRow("Repetitions", self.reps)
        form.addRow("Remote server", self.remote)
        self.form = form
        self.field_check = LengthFieldsCheck(form, {"Prompt lengths": self.prompts, "Answer lengths": self.gens,
                                                    "KV depths": self.depths, "n_ubatch values": self.ubatches})

        self.run_button = QPushButton("Run sweep")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.export_button = QPushButton("Export…")
        self.export_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QLabel("Pick a sweep and press Run. Sweeps load the model in their own engine process.")
        self.status.setWordWrap(True)
        self.finding = QLabel("")
        self.finding.setWordWrap(True)
        self.finding.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.finding.setStyleSheet("font-weight: 600;")
        self.plot = make_plot(theme.colors().base)
        self.empty_hint = empty_label(self.plot, "no data yet: run a sweep")  # not bare 0–1 axes
        self._style_plot()

        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.export_button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addLayout(buttons)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.finding)
        lay.addWidget(self.batch_lab, 1)

        self.run_button.clicked.connect(self.start_sweep)
        self.cancel_button.clicked.connect(self.cancel)
        self.export_button.clicked.connect(self._export_dialog)
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.progressed.connect(self._on_progress)
        self.partial.connect(self._on_partial)
        self.finished.connect(self._on_finished)
        self.failed.connect(self._on_failed)
        self._kind_changed()

    # ------------------------------------------------------------------ controls
    def set_model(self, path: str) -> None:
        self.model_path = path

    def _kind_changed(self) -> None:
        kind = self.kind.currentData()
        batch = kind == "batch"
        for w in (self.run_button, self.cancel_button, self.export_button, self.progress, self.status, self.plot,
                  self.finding):
            w.setVisible(not batch)
        self.form.setRowVisible(self.reps, not batch)
        self.batch_lab.setVisible(batch)
        rows = {"batch": (), "grid": (self.prompts, self.gens, self.remote), "depth": (self.depths,),
                "ubatch": (self.ubatches,), "threads": (), "kv": (), "offload": ()}[kind]
        for w in (self.prompts, self.gens, self.depths, self.ubatches, self.remote):
            self.form.setRowVisible(w, w in rows)
        self.field_check.check()

    @property
    def running(self) -> bool:
        return self._job is not None

    def options(self) -> dict[str, Any]:
        fields = {"prompts": self.prompts, "gens": self.gens, "depths": self.depths, "ubatches": self.ubatches}
        opts: dict[str, Any] = {key: parse_lengths(edit.text()) for key, edit in fields.items()}
        if self.kind.currentData() == "offload":
            opts["n_layers"] = self._model_info().n_layers
        return opts

    def _model_info(self) -> Any:
        from app.core.gguf.info import inspect_gguf

        return inspect_gguf(self.model_path or str(default_model_path()))

    def start_sweep(self) -> None:
        if self.running:
            return
        kind = str(self.kind.currentData())
        remote = self.remote.text().strip() if kind == "grid" else ""
        try:
            steps = plan(kind, self.options(), n_cpus=os.cpu_count() or 1, remote=bool(remote))
        except ValueError as exc:
            self._on_failed(self.field_check.problem() or str(exc))
            return
        self._cancel = cancel = threading.Event()
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.export_button.setEnabled(False)
        self.progress.setRange(0, len(steps))
        self.progress.setValue(0)
        self.finding.setText("")
        self.status.setText("Starting the engine…" if not remote else f"Connecting to {remote}…")
        reps = int(self.reps.value())
        if remote:
            def sweep() -> SweepResult:
                return self._sweep_remote(remote, kind, steps, reps, cancel)
        else:
            base = P.LoadConfig(model_path=self.model_path or str(default_model_path()),
                                n_ctx=context_needed(steps), n_batch=2048)
            for key, value in self.load_overrides.items():
                setattr(base, key, value)

            def sweep() -> SweepResult:
                return self._sweep_local(base, kind, steps, reps, cancel)

        self._job = run_in_background(self, sweep, self._sweep_done, self._sweep_failed, name="lab-sweep")

    def cancel(self) -> None:
        if self.running:
            self._cancel.set()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling after the current measurement…")

    def _batch_base(self) -> P.LoadConfig:
        threads = self.load_overrides.get("n_threads")
        return P.LoadConfig(model_path=self.model_path or str(default_model_path()), n_threads=threads)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop a running sweep (window close): it ends within one repetition, its engine closes."""
        self.batch_lab.shutdown(timeout)
        self._cancel.set()
        if self._job is not None:
            self._job.finished.wait(timeout)

    # ------------------------------------------------------------------ worker thread
    def _progress(self, i: int, n: int, label: str) -> None:
        try:
            self.progressed.emit(i, n, label)  # queued to the GUI thread
        except RuntimeError:  # the page was deleted while the sweep ran: nobody to tell
            pass

    def _partial(self, result: SweepResult) -> None:
        try:
            self.partial.emit(result)  # queued to the GUI thread
        except RuntimeError:  # the page was deleted while the sweep ran
            pass

    def _sweep_local(self, base: P.LoadConfig, kind: str, steps: list[Any], reps: int,
                     cancel: threading.Event) -> SweepResult:
        with self.engine.measuring_engine() as client:
            result = run_sweep(kind, steps, EngineSweepBackend(client, base, cancel), reps, self._progress,
                               cancel.is_set, self._partial)
        if kind == "offload" and result.points:  # the picker's curve beside the measured one
            from app.core.bench.sweeps import attach_offload_prediction
            from app.core.predict.recommend import Machine, decode_at_offload
            from app.engine.device_query import query_devices

            machine = Machine.from_system(llama_devices=query_devices())
            attach_offload_prediction(result, decode_at_offload(self._model_info(), machine, base.n_ctx))
        return result

    def _sweep_remote(self, url: str, kind: str, steps: list[Any], reps: int,
                      cancel: threading.Event) -> SweepResult:
        with RemoteClient(url, timeout=120) as client:
            client.connect()
            return run_sweep(kind, steps, RemoteSweepBackend(client, cancel), reps, self._progress, cancel.is_set,
                             self._partial)

    # ------------------------------------------------------------------ GUI thread
    def _sweep_done(self, result: SweepResult) -> None:
        self._job = None
        self.finished.emit(result)

    def _sweep_failed(self, exc: BaseException) -> None:
        self._job = None
        self.failed.emit(str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}")

    def _on_progress(self, i: int, n: int, label: str) -> None:
        self.progress.setRange(0, max(1, n))
        self.progress.setValue(i)
        if label not in ("done", "cancelled"):
            self.status.setText(f"Measuring {label}  ({i + 1} of {n})")

    def _on_partial(self, result: SweepResult) -> None:
        """The points measured so far, drawn while the sweep goes on (the finding waits for the end)."""
        if self.running:
            self.shown = result
            self._draw(result)

    def restyle(self) -> None:
        """The theme changed: the charts' background, axes and labels in its colours, redrawn."""
        self._style_plot()
        if self.shown is not None:
            self._draw(self.shown)
        self.field_check.check()  # a wrong entry's message and border in the new theme's warning colour
        self.batch_lab.restyle()

    def _draw(self, result: SweepResult) -> None:
        self.empty_hint.hide()
        draw_result(self.plot, result, theme.colors())

    def _style_plot(self) -> None:
        """The sweep chart's background, axes and empty-chart hint in the theme's colours."""
        c = theme.colors()
        restyle_plot(self.plot, c.base, c.muted, c.text)
        restyle_empty_label(self.empty_hint)

    def _on_finished(self, result: SweepResult) -> None:
        self.result = result
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.export_button.setEnabled(bool(result.measurements))
        self.status.setText(("Cancelled. " if result.cancelled else "Done. ") +
                            f"{len(result.measurements)} measurements; {result.backend.get('timing', '')}.")
        self.finding.setText(result.finding)
        self.shown = result
        self._draw(result)

    def _on_failed(self, message: str) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.status.setText(f"The sweep failed: {message}")

    # ------------------------------------------------------------------ export
    def export(self, json_path: str | Path | None = None, csv_path: str | Path | None = None,
               png_path: str | Path | None = None) -> None:
        if self.result is None:
            raise RuntimeError("no sweep result to export")
        if json_path:
            Path(json_path).write_text(json.dumps(self.result.rows(), indent=2) + "\n", encoding="utf-8")
        if csv_path:
            Path(csv_path).write_text(self.result.csv_text(), encoding="utf-8")
        if png_path:  # the chart with its finding under it, as `roofline sweep --png` draws it
            render_png(self.result, png_path)

    def _export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export sweep", f"sweep-{self.kind.currentData()}.json",
                                              "llama-bench JSON (*.json);;CSV (*.csv);;PNG image (*.png)")
        if not path:
            return
        ext = Path(path).suffix.lower()
        try:
            self.export(json_path=path if ext == ".json" else None, csv_path=path if ext == ".csv" else None,
                        png_path=path if ext == ".png" else None)
            self.status.setText(f"Wrote {path}")
        except OSError as exc:
            self.status.setText(f"Could not write {path}: {exc}")
