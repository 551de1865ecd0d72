"""The batching lab: the Lab page's "batch" sweep — decode tok/s at 1, 2, 4, 8, 16 concurrent streams.

It runs `app.engine.batch.sweep.measure_batch` (the batch engine `roofline serve` runs, in its own process)
off the GUI thread with progress and cancel, then draws two plots:
- throughput: measured aggregate and per-stream decode tok/s against the stream count, with
  app.core.predict.batching's predicted curves dashed beside them;
- the roofline (app.core.bench.batch_roofline): the bandwidth slope and the compute roof of this machine, and each
  count as an operating point that moves right as the batch raises the arithmetic intensity, until it meets
  the compute roof;
and ends with the one-sentence finding of app.core.bench.batch_sweep ("batching stops paying at ~N streams").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
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

from app.core.bench.batch_roofline import BatchRoofline
from app.core.bench.batch_sweep import BatchSweepRow
from app.core.predict.machine_roofs import roofs_line
from app.engine import protocol as P
from app.ui.dashboard.plots import make_plot, restyle_plot
from app.ui.lab.length_fields import parse_lengths
from app.ui.toolkit import theme
from app.ui.toolkit.background import BackgroundJob, run_in_background


@dataclass(frozen=True)
class BatchLabResult:
    rows: list[BatchSweepRow]
    roofline: BatchRoofline
    finding: str
    calibrated: bool
    cancelled: bool


def measure(base: P.LoadConfig, counts: list[int], tokens: int, rounds: int, progress: Any,
            cancelled: Any, partial: Callable[[BatchLabResult], None] | None = None) -> BatchLabResult:
    """The sweep and its prediction (runs on a worker thread); `partial` gets the result so far after each
    measured count (the prediction is known first: the charts show it from the start)."""
    from app.core.bench.batch_roofline import batch_roofline
    from app.core.bench.batch_sweep import build_rows, finding, predicted_curve
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.machine_roofs import machine_figures
    from app.engine.batch.sweep import MeasuredPoint, measure_batch

    rates, measurement = machine_figures(base.n_threads)
    predicted, calibrated = predicted_curve(base.model_path, counts, rates, tokens=tokens)
    info = inspect_gguf(base.model_path)

    def result(points: list[MeasuredPoint], final: bool) -> BatchLabResult:
        measured = [(p.streams, p.aggregate_tps) for p in points]
        roof = batch_roofline(info, rates, predicted, dict(measured), measurement)
        return BatchLabResult(build_rows(measured, predicted), roof, finding(measured) if final else "",
                              calibrated, final and bool(cancelled()) and len(points) < len(counts))

    def so_far(points: list[MeasuredPoint]) -> None:
        if partial is not None:
            partial(result(points, final=False))

    points = measure_batch(base, counts, tokens, rounds, progress, cancelled, measured=so_far)
    return result(points, final=True)


def _plot(title: str, left: str, bottom: str, log: bool) -> pg.PlotWidget:
    w = make_plot(title, left, bottom)  # the dashboard's look: grid, no menu or mouse, no SI multiplier
    w.setMaximumHeight(16777215)  # a Lab plot grows with the page (the dashboard's are fixed)
    w.setMinimumHeight(240)
    w.setLogMode(x=True, y=log)
    w.addLegend(offset=(10, 10), labelTextSize="8pt")
    c = theme.colors()
    restyle_plot(w, c.base, c.muted, c.text)  # the theme's text from the start, not only after a switch
    return w


class BatchLabPanel(QWidget):
    progressed = Signal(int, int, str)
    partial = Signal(object)  # BatchLabResult of the counts measured so far
    finished = Signal(object)  # BatchLabResult
    failed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.base: P.LoadConfig | None = None
        self.base_provider: Callable[[], P.LoadConfig] | None = None  # the Lab page's model, asked at Run
        self.result: BatchLabResult | None = None
        self.shown: BatchLabResult | None = None  # drawn now: the finished result or the counts so far
        self._job: BackgroundJob | None = None
        self._cancel = threading.Event()
        self.streams = QLineEdit("1,2,4,8,16")
        self.tokens = QSpinBox()
        self.tokens.setRange(4, 4096)
        self.tokens.setValue(64)
        self.rounds = QSpinBox()
        self.rounds.setRange(1, 20)
        self.rounds.setValue(1)
        form = QFormLayout()
        form.addRow("Concurrent streams", self.streams)
        form.addRow("Tokens per stream", self.tokens)
        form.addRow("Rounds (median)", self.rounds)
        self.run_button = QPushButton("Run batching sweep")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.status = QLabel("Measures decode tok/s with 1, 2, 4, … requests decoded together, in the batch "
                             "engine roofline serve runs (its own process).")
        self.status.setWordWrap(True)
        self.finding = QLabel("")
        self.finding.setWordWrap(True)
        self.finding.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.finding.setStyleSheet("font-weight: 600;")
        self.plot_rate = _plot("Decode tok/s vs concurrent streams", "tok/s", "streams", log=False)
        self.plot_roof = _plot("Roofline: the operating point moves right with the batch", "FLOP/s",
                               "arithmetic intensity (FLOPs/byte)", log=True)
        for plot in (self.plot_rate, self.plot_roof):
            for axis in ("left", "bottom"):  # the ticks carry their own units ("100 G")
                plot.getAxis(axis).enableAutoSIPrefix(False)
        # the roofs' figures and their source: the same stored measurement the dashboard's roofline shows
        self.roof_note = QLabel("")
        self.roof_note.setWordWrap(True)
        self.plots = QWidget()
        pl = QVBoxLayout(self.plots)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.addWidget(self.plot_rate)
        pl.addWidget(self.plot_roof)
        pl.addWidget(self.roof_note)
        pl.addWidget(self.finding)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(form)
        lay.addLayout(buttons)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.plots, 1)
        self.run_button.clicked.connect(lambda: self.start())
        self.cancel_button.clicked.connect(self.cancel)
        self.progressed.connect(self._on_progress)
        self.partial.connect(self._on_partial)
        self.finished.connect(self.show_result)
        self.failed.connect(self._on_failed)

    @property
    def running(self) -> bool:
        return self._job is not None

    def start(self, base: P.LoadConfig | None = None) -> None:
        """Run the sweep on `base` (the model and its load options; default: the last one given)."""
        base = base or (self.base_provider() if self.base_provider is not None else self.base)
        if self.running or base is None:
            return
        self.base = base
        try:
            counts = sorted(set(parse_lengths(self.streams.text())))
            if not counts or counts[0] < 1 or counts[-1] > 64:
                raise ValueError
        except ValueError:
            self._on_failed("give stream counts from 1 to 64, separated by commas (e.g. 1,2,4,8,16)")
            return
        tokens, rounds = int(self.tokens.value()), int(self.rounds.value())
        self._cancel = cancel = threading.Event()
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, len(counts) * rounds)
        self.progress.setValue(0)
        self.finding.setText("")
        self.status.setText("Starting the batch engine…")

        def work() -> BatchLabResult:
            return measure(base, counts, tokens, rounds, self._progress, cancel.is_set, self._partial)

        self._job = run_in_background(self, work, self._done, self._error, name="batch-lab")

    def cancel(self) -> None:
        if self.running:
            self._cancel.set()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling after the current stream count…")

    def shutdown(self, timeout: float = 10.0) -> None:
        self._cancel.set()
        if self._job is not None:
            self._job.finished.wait(timeout)

    # ------------------------------------------------------------------ worker thread → GUI thread
    def _progress(self, i: int, n: int, label: str) -> None:
        try:
            self.progressed.emit(i, n, label)
        except RuntimeError:  # the panel is gone
            pass

    def _partial(self, result: BatchLabResult) -> None:
        try:
            self.partial.emit(result)
        except RuntimeError:  # the panel is gone
            pass

    def _done(self, result: BatchLabResult) -> None:
        self._job = None
        self.finished.emit(result)

    def _error(self, exc: BaseException) -> None:
        self._job = None
        self.failed.emit(f"{exc}" if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}")

    def _on_progress(self, i: int, n: int, label: str) -> None:
        self.progress.setRange(0, max(1, n))
        self.progress.setValue(i - 1)
        self.status.setText(f"Measuring {label}  ({i} of {n})")

    def _on_failed(self, message: str) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.status.setText(f"The batching sweep failed: {message}")

    # ------------------------------------------------------------------ drawing
    def _on_partial(self, result: BatchLabResult) -> None:
        """The counts measured so far, drawn while the sweep goes on."""
        if self.running:
            self.shown = result
            self._draw_rates(result)
            self._draw_roofline(result.roofline)

    def restyle(self) -> None:
        """The theme changed: both plots in its colours, redrawn."""
        c = theme.colors()
        for plot in (self.plot_rate, self.plot_roof):
            restyle_plot(plot, c.base, c.muted, c.text)
        if self.shown is not None:
            self._draw_rates(self.shown)
            self._draw_roofline(self.shown.roofline)

    def show_result(self, result: BatchLabResult) -> None:
        self.result = self.shown = result
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.progress.setValue(self.progress.maximum())
        source = "calibrated" if result.calibrated else "uncalibrated (run roofline calibrate)"
        self.status.setText(("Cancelled. " if result.cancelled else "Done. ")
                            + f"{len(result.rows)} stream counts measured; prediction from {source} rates.")
        self.finding.setText(result.finding[:1].upper() + result.finding[1:] + ".")
        self._draw_rates(result)
        self._draw_roofline(result.roofline)

    def _draw_rates(self, result: BatchLabResult) -> None:
        p = self.plot_rate
        p.clear()
        rows = result.rows
        xs = [float(r.streams) for r in rows]
        predicted = [r for r in rows if r.predicted_aggregate_tps]
        p.plot(xs, [r.aggregate_tps for r in rows], pen=pg.mkPen(theme.DECODE, width=2), symbol="o",
               symbolBrush=theme.DECODE, symbolPen=None, name="aggregate (measured)")
        p.plot(xs, [r.per_stream_tps for r in rows], pen=pg.mkPen(theme.PREFILL, width=2), symbol="s",
               symbolBrush=theme.PREFILL, symbolPen=None, name="per stream (measured)")
        if predicted:
            px = [float(r.streams) for r in predicted]
            p.plot(px, [r.predicted_aggregate_tps for r in predicted],
                   pen=pg.mkPen(theme.DECODE, width=1, style=Qt.PenStyle.DashLine), name="aggregate (predicted)")
            p.plot(px, [r.predicted_per_stream_tps for r in predicted],
                   pen=pg.mkPen(theme.PREFILL, width=1, style=Qt.PenStyle.DashLine), name="per stream (predicted)")
        p.getAxis("bottom").setTicks([[(math.log10(x), f"{x:g}") for x in xs], []])

    def _draw_roofline(self, roof: BatchRoofline) -> None:
        p = self.plot_roof
        p.clear()
        pts = roof.points
        if not pts or roof.bandwidth <= 0 or roof.peak_flops <= 0:
            self.roof_note.setText("")
            return
        self.roof_note.setText(roofs_line(roof.bandwidth, roof.peak_flops, roof.note))
        lo = min(min(q.intensity for q in pts), roof.ridge) / 3
        hi = max(max(q.intensity for q in pts), roof.ridge) * 3
        xs = np.logspace(math.log10(lo), math.log10(hi), 80)
        p.plot(xs, [roof.roof(x) for x in xs], pen=pg.mkPen(theme.ROOF, width=2),
               name=f"roof: {roof.bandwidth / 1e9:.0f} GB/s slope, {roof.peak_flops / 1e9:.0f} GFLOP/s")
        predicted = theme.colors().muted  # grey in either theme; restyle draws it again after a switch
        p.plot([q.intensity for q in pts], [q.predicted_flops for q in pts], pen=pg.mkPen(predicted, width=1,
               style=Qt.PenStyle.DashLine), symbol="o", symbolBrush=None, symbolPen=pg.mkPen(predicted),
               name="predicted")
        done = [q for q in pts if q.measured_flops]
        p.plot([q.intensity for q in done], [q.measured_flops for q in done], pen=pg.mkPen(theme.DECODE, width=2),
               symbol="o", symbolSize=10, symbolBrush=theme.DECODE, symbolPen=None, name="measured")
        for q in pts:
            y = q.measured_flops or q.predicted_flops
            label = pg.TextItem(f"{q.streams}", color=theme.colors().text, anchor=(0.5, 1.3))
            label.setPos(math.log10(q.intensity), math.log10(y))
            p.addItem(label)
        ys = [roof.roof(x) for x in xs] + [q.predicted_flops for q in pts] + [q.measured_flops or 0.0 for q in done]
        decades = range(math.floor(math.log10(min(y for y in ys if y > 0))), math.ceil(math.log10(max(ys))) + 1)
        p.getAxis("left").setTicks([[(float(e), f"{10.0 ** e / 1e9:g} G") for e in decades], []])
        p.getAxis("bottom").setTicks([[(float(e), f"{10.0 ** e:g}") for e in range(
            math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)], []])
