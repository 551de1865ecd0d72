"""The Lab page: run benchmark sweeps on this machine (or a remote server) and see which phase dominates.

The prompt × generation grid is drawn as stacked bars (prefill below, decode above) per prompt length, one
bar per answer length, with a marker at the interpolated crossover where prefill starts to dominate. The
other sweeps are line/bar charts of tok/s. Every sweep ends with a one-sentence finding computed from the
data. Engine work runs on a worker thread with its own blocking EngineClient (or RemoteClient); the GUI
thread only receives progress/result signals. `render_png` draws a result offscreen (also used by the CLI).
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
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

from app.core.sweeps import KINDS, SweepResult, context_needed, grid_cells, nice, plan, run_sweep
from app.ui import theme
from app.ui.length_fields import LengthFieldsCheck, parse_lengths

KIND_TITLES = {
    "grid": "Prompt × answer length: where does the time go?",
    "depth": "Decode speed vs KV-cache depth",
    "ubatch": "Prefill speed vs n_ubatch (chunked prefill)",
    "threads": "Prefill and decode speed vs threads",
    "kv": "KV cache type and flash attention (A/B)",
}


# ------------------------------------------------------------------------------------------ chart
def draw_result(plot: pg.PlotWidget, result: SweepResult) -> None:
    """Draw a sweep result into `plot` (cleared first)."""
    plot.clear()
    plot.enableAutoRange()
    item = plot.getPlotItem()
    if item.legend is not None:  # clear() leaves the legend: drop it, each chart adds its own
        scene = item.legend.scene()
        if scene is not None:
            scene.removeItem(item.legend)
        item.legend = None
    plot.setTitle(KIND_TITLES.get(result.kind, result.kind), size="10pt")
    bottom = plot.getAxis("bottom")
    bottom.setTicks(None)
    if result.kind == "grid":
        _draw_grid(plot, result)
    elif result.kind == "depth":
        _line(plot, [p["n_depth"] for p in result.points], [p["decode_tps"] for p in result.points],
              theme.DECODE, "decode")
        plot.setLabel("bottom", "tokens already in the KV cache (depth)")
        plot.setLabel("left", "decode tok/s")
    elif result.kind == "ubatch":
        xs = list(range(len(result.points)))
        _line(plot, xs, [p["prefill_tps"] for p in result.points], theme.PREFILL, "prefill")
        bottom.setTicks([[(i, str(p["n_ubatch"])) for i, p in enumerate(result.points)]])
        plot.setLabel("bottom", "n_ubatch (tokens per compute batch)")
        plot.setLabel("left", "prefill tok/s")
    elif result.kind == "threads":
        plot.addLegend(offset=(10, 10))
        xs = [p["n_threads"] for p in result.points]
        _line(plot, xs, [p["prefill_tps"] / 10.0 for p in result.points], theme.PREFILL, "prefill ÷ 10")
        _line(plot, xs, [p["decode_tps"] for p in result.points], theme.DECODE, "decode")
        bottom.setTicks([[(x, str(x)) for x in xs]])
        plot.setLabel("bottom", "threads")
        plot.setLabel("left", "tok/s")
    elif result.kind == "kv":
        _draw_kv(plot, result)


def _line(plot: pg.PlotWidget, xs: list[Any], ys: list[float], color: str, name: str) -> None:
    pts = [(x, y) for x, y in zip(xs, ys) if isinstance(y, float) and math.isfinite(y)]
    plot.plot([p[0] for p in pts], [p[1] for p in pts], pen=pg.mkPen(color, width=2), symbol="o",
              symbolBrush=color, symbolPen=None, name=name)


def _draw_grid(plot: pg.PlotWidget, result: SweepResult) -> None:
    cells = grid_cells(result.measurements)
    prompts = sorted({c["n_prompt"] for c in cells})
    gens = sorted({c["n_gen"] for c in cells})
    if not cells:
        return
    scale, unit = (1000.0, "s") if max(c["total_ms"] for c in cells) > 3000 else (1.0, "ms")
    k = len(gens)
    width = 0.8 / k
    legend = plot.addLegend(offset=(10, 5))
    for j, g in enumerate(gens):
        row = {c["n_prompt"]: c for c in cells if c["n_gen"] == g}
        xs = [i - 0.4 + width * (j + 0.5) for i, p in enumerate(prompts) if p in row]
        pre = [row[p]["prefill_ms"] / scale for p in prompts if p in row]
        dec = [row[p]["decode_ms"] / scale for p in prompts if p in row]
        shade = 255 - int(110 * j / max(1, k - 1)) if k > 1 else 255
        bars_pre = pg.BarGraphItem(x=xs, y0=[0.0] * len(xs), height=pre, width=width * 0.92,
                                   brush=pg.mkBrush(_with_alpha(theme.PREFILL, shade)), pen=pg.mkPen("w", width=0.5))
        bars_dec = pg.BarGraphItem(x=xs, y0=pre, height=dec, width=width * 0.92,
                                   brush=pg.mkBrush(_with_alpha(theme.DECODE, shade)), pen=pg.mkPen("w", width=0.5))
        plot.addItem(bars_pre)
        plot.addItem(bars_dec)
        if j == 0:
            legend.addItem(bars_pre, "prefill (prompt)")
            legend.addItem(bars_dec, "decode (answer)")
        for x, a, b in zip(xs, pre, dec):
            text = pg.TextItem(f"{g}", color=theme.colors().muted, anchor=(0.5, 1.0))
            text.setPos(x, a + b)
            plot.addItem(text)
    plot.getAxis("bottom").setTicks([[(i, str(p)) for i, p in enumerate(prompts)]])
    # headroom above the tallest bar for the legend, the bar labels and the crossover label
    plot.setYRange(0, 1.3 * max(c["total_ms"] for c in cells) / scale, padding=0)
    plot.setLabel("bottom", "prompt tokens (bars: one per answer length, labelled with its tokens)")
    plot.setLabel("left", f"time ({unit})")
    cross = result.crossover
    if cross and len(prompts) > 1:
        x = _index_position(prompts, cross["n_prompt"])
        tag = "extrapolated " if cross.get("extrapolated") else ""
        label = f"{tag}crossover ≈ {nice(cross['n_prompt'])} tok (answers of {cross['n_gen']:.0f})"
        line = pg.InfiniteLine(pos=x, angle=90, pen=pg.mkPen(theme.ROOF, width=2, style=Qt.PenStyle.DashLine),
                               label=label, labelOpts={"position": 0.92, "color": theme.colors().text,
                                                       "fill": _with_alpha(theme.colors().base, 220)})
        plot.addItem(line)


def _with_alpha(color: str, alpha: int) -> Any:
    c = pg.mkColor(color)
    c.setAlpha(alpha)
    return c


def _index_position(prompts: list[int], p: float) -> float:
    """Where prompt length `p` falls on the categorical axis (linear between neighbouring bars)."""
    if p <= prompts[0]:
        return (p - prompts[0]) / (prompts[1] - prompts[0])
    for i, (a, b) in enumerate(zip(prompts, prompts[1:])):
        if a <= p <= b:
            return i + (p - a) / (b - a)
    a, b = prompts[-2], prompts[-1]
    return len(prompts) - 1 + (p - b) / (b - a)


def _draw_kv(plot: pg.PlotWidget, result: SweepResult) -> None:
    pts = result.points
    if not pts:
        return
    base = pts[0]
    legend = plot.addLegend(offset=(10, 10))
    xs = list(range(len(pts)))
    pre = [100.0 * p["prefill_tps"] / base["prefill_tps"] for p in pts]
    dec = [100.0 * p["decode_tps"] / base["decode_tps"] for p in pts]
    b1 = pg.BarGraphItem(x=[x - 0.18 for x in xs], height=pre, width=0.34, brush=theme.PREFILL)
    b2 = pg.BarGraphItem(x=[x + 0.18 for x in xs], height=dec, width=0.34, brush=theme.DECODE)
    plot.addItem(b1)
    plot.addItem(b2)
    legend.addItem(b1, "prefill")
    legend.addItem(b2, "decode")
    plot.addItem(pg.InfiniteLine(pos=100, angle=0, pen=pg.mkPen(theme.ROOF, style=Qt.PenStyle.DashLine)))
    plot.getAxis("bottom").setTicks([[(x, p["variant"]) for x, p in zip(xs, pts)]])
    plot.setLabel("left", f"% of {base['variant']}")


def make_plot() -> pg.PlotWidget:
    w = pg.PlotWidget()
    w.setBackground(theme.colors().base)
    w.showGrid(x=False, y=True, alpha=0.25)
    w.setMenuEnabled(False)
    w.setMouseEnabled(x=False, y=False)
    w.hideButtons()
    w.setMinimumHeight(300)
    return w


def render_png(result: SweepResult, path: str | Path, size: tuple[int, int] = (960, 560)) -> None:
    """Draw the chart and its finding offscreen and save a PNG (CLI `--png`, docs, tests)."""
    if QApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _keep.append(QApplication([]))
    box = QWidget()
    box.setStyleSheet("background: white;")
    lay = QVBoxLayout(box)
    plot = make_plot()
    plot.setBackground("w")
    lay.addWidget(plot, 1)
    label = QLabel(result.finding)
    label.setWordWrap(True)
    label.setStyleSheet("font-size: 13px; font-weight: 600; color: #202124; background: white;")
    lay.addWidget(label)
    draw_result(plot, result)
    box.resize(*size)
    box.ensurePolished()
    lay.activate()  # lay out without show(): grab() renders hidden widgets
    QApplication.processEvents()
    if not box.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    box.close()
    box.deleteLater()


_keep: list[QApplication] = []


# ------------------------------------------------------------------------------------------ page
class LabPage(QWidget):
    """Sweeps with progress and cancel. `finished(SweepResult)` / `failed(str)` for the window and tests."""

    progressed = Signal(int, int, str)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, model_path: str | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_path = model_path
        self.result: SweepResult | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self.load_overrides: dict[str, Any] = {}  # e.g. the tuned threads/n_ubatch, set by the window

        self.kind = QComboBox()
        for k in KINDS:
            self.kind.addItem(KIND_TITLES[k], k)
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
        self.plot = make_plot()

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

        self.run_button.clicked.connect(self.start_sweep)
        self.cancel_button.clicked.connect(self.cancel)
        self.export_button.clicked.connect(self._export_dialog)
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.progressed.connect(self._on_progress)
        self.finished.connect(self._on_finished)
        self.failed.connect(self._on_failed)
        self._kind_changed()

    # ------------------------------------------------------------------ controls
    def set_model(self, path: str) -> None:
        self.model_path = path

    def _kind_changed(self) -> None:
        kind = self.kind.currentData()
        rows = {"grid": (self.prompts, self.gens, self.remote), "depth": (self.depths,),
                "ubatch": (self.ubatches,), "threads": (), "kv": ()}[kind]
        for w in (self.prompts, self.gens, self.depths, self.ubatches, self.remote):
            self.form.setRowVisible(w, w in rows)
        self.field_check.check()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def options(self) -> dict[str, Any]:
        fields = {"prompts": self.prompts, "gens": self.gens, "depths": self.depths, "ubatches": self.ubatches}
        return {key: parse_lengths(edit.text()) for key, edit in fields.items()}

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
        self._cancel = threading.Event()
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.export_button.setEnabled(False)
        self.progress.setRange(0, len(steps))
        self.progress.setValue(0)
        self.finding.setText("")
        self.status.setText("Starting the engine…" if not remote else f"Connecting to {remote}…")
        args = (kind, steps, int(self.reps.value()), remote, self._cancel)
        self._thread = threading.Thread(target=self._work, args=args, name="lab-sweep", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        if self.running:
            self._cancel.set()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling after the current measurement…")

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop a running sweep (window close)."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ worker thread
    def _work(self, kind: str, steps: list[Any], reps: int, remote: str, cancel: threading.Event) -> None:
        from app.engine import protocol as P
        from app.engine.client import EngineError

        def progress(i: int, n: int, label: str) -> None:
            self._emit(self.progressed, i, n, label)

        try:
            if remote:
                from app.engine.remote import RemoteClient
                from app.engine.sweep_backend import RemoteSweepBackend

                with RemoteClient(remote, timeout=120) as client:
                    client.connect()
                    result = run_sweep(kind, steps, RemoteSweepBackend(client, cancel), reps, progress,
                                       cancel.is_set)
            else:
                from app.core.default_model import default_model_path
                from app.engine.client import EngineClient
                from app.engine.sweep_backend import EngineSweepBackend

                path = self.model_path or str(default_model_path())
                base = P.LoadConfig(model_path=path, n_ctx=context_needed(steps), n_batch=2048)
                for key, value in self.load_overrides.items():
                    setattr(base, key, value)
                with EngineClient() as engine:
                    result = run_sweep(kind, steps, EngineSweepBackend(engine, base, cancel), reps, progress,
                                       cancel.is_set)
        except EngineError as exc:
            self._emit(self.failed, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a worker thread must report, never die silently
            self._emit(self.failed, f"{type(exc).__name__}: {exc}")
            return
        self._emit(self.finished, result)

    @staticmethod
    def _emit(signal: Any, *args: Any) -> None:
        try:
            signal.emit(*args)
        except RuntimeError:  # the page was deleted while the sweep ran
            pass

    # ------------------------------------------------------------------ GUI thread
    def _on_progress(self, i: int, n: int, label: str) -> None:
        self.progress.setRange(0, max(1, n))
        self.progress.setValue(i)
        if label not in ("done", "cancelled"):
            self.status.setText(f"Measuring {label}  ({i + 1} of {n})")

    def _on_finished(self, result: SweepResult) -> None:
        self.result = result
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.export_button.setEnabled(bool(result.measurements))
        self.status.setText(("Cancelled. " if result.cancelled else "Done. ") +
                            f"{len(result.measurements)} measurements; {result.backend.get('timing', '')}.")
        self.finding.setText(result.finding)
        draw_result(self.plot, result)

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
        if png_path:
            if not self.plot.grab().save(str(png_path)):
                raise OSError(f"could not write {png_path}")

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
