"""The sweep chart: the prompt × generation grid as stacked bars (prefill below, decode above) per prompt
length, one bar per answer length, with a marker at the interpolated crossover where prefill starts to
dominate; the other sweeps as line/bar charts of tok/s. `draw_result` draws into a plot (the Lab page's,
in the window's colours); `render_png` draws a result with its finding offscreen on white and saves a PNG
(`roofline sweep --png`, docs, tests), creating an offscreen QApplication when there is none.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from app.charts.colors import DECODE, PREFILL, ROOF
from app.core.bench.sweep_findings import grid_cells, nice
from app.core.bench.sweeps import SweepResult

KIND_TITLES = {
    "grid": "Prompt × answer length: where does the time go?",
    "depth": "Decode speed vs KV-cache depth",
    "ubatch": "Prefill speed vs n_ubatch (chunked prefill)",
    "threads": "Prefill and decode speed vs threads",
    "kv": "KV cache type and flash attention (A/B)",
    "offload": "Speed vs layers on the GPU, measured and predicted",
}



class ChartColors(Protocol):
    """The colours a chart takes from its surroundings (app.ui.toolkit.theme.Colors has them)."""

    @property
    def text(self) -> str: ...
    @property
    def muted(self) -> str: ...
    @property
    def base(self) -> str: ...


@dataclass(frozen=True)
class _Colors:
    text: str
    muted: str
    base: str


ON_WHITE = _Colors(text="#000000", muted="#5f6368", base="#ffffff")  # a PNG is drawn on white


def draw_result(plot: pg.PlotWidget, result: SweepResult, colors: ChartColors = ON_WHITE) -> None:
    """Draw a sweep result into `plot` (cleared first), its labels in `colors`."""
    plot.clear()
    plot.enableAutoRange()
    item = plot.getPlotItem()
    if item.legend is not None:  # clear() leaves the legend: drop it, each chart adds its own
        scene = item.legend.scene()
        if scene is not None:
            scene.removeItem(item.legend)
        item.legend = None
    # the title, axes and legends in the text colour: pyqtgraph's own grey was faint on white
    plot.setTitle(KIND_TITLES.get(result.kind, result.kind), size="10pt", color=colors.text)
    for name in ("left", "bottom"):
        plot.getAxis(name).setPen(pg.mkPen(colors.muted))
        plot.getAxis(name).setTextPen(pg.mkPen(colors.text))
    bottom = plot.getAxis("bottom")
    bottom.setTicks(None)
    if result.kind == "grid":
        _draw_grid(plot, result, colors)
    elif result.kind == "depth":
        _line(plot, [p["n_depth"] for p in result.points], [p["decode_tps"] for p in result.points],
              DECODE, "decode")
        plot.setLabel("bottom", "tokens already in the KV cache (depth)")
        plot.setLabel("left", "decode tok/s")
    elif result.kind == "ubatch":
        xs = list(range(len(result.points)))
        _line(plot, xs, [p["prefill_tps"] for p in result.points], PREFILL, "prefill")
        bottom.setTicks([[(i, str(p["n_ubatch"])) for i, p in enumerate(result.points)]])
        plot.setLabel("bottom", "n_ubatch (tokens per compute batch)")
        plot.setLabel("left", "prefill tok/s")
    elif result.kind == "threads":
        plot.addLegend(offset=(10, 10), labelTextColor=colors.text)
        xs = [p["n_threads"] for p in result.points]
        _line(plot, xs, [p["prefill_tps"] / 10.0 for p in result.points], PREFILL, "prefill ÷ 10")
        _line(plot, xs, [p["decode_tps"] for p in result.points], DECODE, "decode")
        bottom.setTicks([[(x, str(x)) for x in xs]])
        plot.setLabel("bottom", "threads")
        plot.setLabel("left", "tok/s")
    elif result.kind == "kv":
        _draw_kv(plot, result, colors)
    elif result.kind == "offload":
        plot.addLegend(offset=(10, 10), labelTextColor=colors.text)
        xs = [p["n_gpu_layers"] for p in result.points]
        _line(plot, xs, [p["prefill_tps"] / 10.0 for p in result.points], PREFILL, "prefill ÷ 10")
        _line(plot, xs, [p["decode_tps"] for p in result.points], DECODE, "decode")
        if result.predicted:
            pred = [(p["n_gpu_layers"], p["decode_tps"]) for p in result.predicted]
            dashed = pg.mkPen(DECODE, width=2, style=Qt.PenStyle.DashLine)
            plot.plot([x for x, _ in pred], [y for _, y in pred], pen=dashed, name="decode predicted")
        bottom.setTicks([[(x, str(x)) for x in xs]])
        plot.setLabel("bottom", "n_gpu_layers")
        plot.setLabel("left", "tok/s")


def _line(plot: pg.PlotWidget, xs: list[Any], ys: list[float], color: str, name: str) -> None:
    pts = [(x, y) for x, y in zip(xs, ys, strict=False) if isinstance(y, float) and math.isfinite(y)]
    plot.plot([p[0] for p in pts], [p[1] for p in pts], pen=pg.mkPen(color, width=2), symbol="o",
              symbolBrush=color, symbolPen=None, name=name)


def _draw_grid(plot: pg.PlotWidget, result: SweepResult, colors: ChartColors) -> None:
    cells = grid_cells(result.measurements)
    prompts = sorted({c["n_prompt"] for c in cells})
    gens = sorted({c["n_gen"] for c in cells})
    if not cells:
        return
    scale, unit = (1000.0, "s") if max(c["total_ms"] for c in cells) > 3000 else (1.0, "ms")
    k = len(gens)
    width = 0.8 / k
    legend = plot.addLegend(offset=(10, 5), labelTextColor=colors.text)
    for j, g in enumerate(gens):
        row = {c["n_prompt"]: c for c in cells if c["n_gen"] == g}
        xs = [i - 0.4 + width * (j + 0.5) for i, p in enumerate(prompts) if p in row]
        pre = [row[p]["prefill_ms"] / scale for p in prompts if p in row]
        dec = [row[p]["decode_ms"] / scale for p in prompts if p in row]
        shade = 255 - int(110 * j / max(1, k - 1)) if k > 1 else 255
        bars_pre = pg.BarGraphItem(x=xs, y0=[0.0] * len(xs), height=pre, width=width * 0.92,
                                   brush=pg.mkBrush(_with_alpha(PREFILL, shade)), pen=pg.mkPen("w", width=0.5))
        bars_dec = pg.BarGraphItem(x=xs, y0=pre, height=dec, width=width * 0.92,
                                   brush=pg.mkBrush(_with_alpha(DECODE, shade)), pen=pg.mkPen("w", width=0.5))
        plot.addItem(bars_pre)
        plot.addItem(bars_dec)
        if j == 0:
            legend.addItem(bars_pre, "prefill (prompt)")
            legend.addItem(bars_dec, "decode (answer)")
        for x, a, b in zip(xs, pre, dec, strict=False):
            text = pg.TextItem(f"{g}", color=colors.muted, anchor=(0.5, 1.0))
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
        line = pg.InfiniteLine(pos=x, angle=90, pen=pg.mkPen(ROOF, width=2, style=Qt.PenStyle.DashLine),
                               label=label, labelOpts={"position": 0.92, "color": colors.text,
                                                       "fill": _with_alpha(colors.base, 220)})
        plot.addItem(line)


def _with_alpha(color: str, alpha: int) -> Any:
    c = pg.mkColor(color)
    c.setAlpha(alpha)
    return c


def _index_position(prompts: list[int], p: float) -> float:
    """Where prompt length `p` falls on the categorical axis (linear between neighbouring bars)."""
    if p <= prompts[0]:
        return (p - prompts[0]) / (prompts[1] - prompts[0])
    for i, (a, b) in enumerate(itertools.pairwise(prompts)):
        if a <= p <= b:
            return i + (p - a) / (b - a)
    a, b = prompts[-2], prompts[-1]
    return len(prompts) - 1 + (p - b) / (b - a)


def _draw_kv(plot: pg.PlotWidget, result: SweepResult, colors: ChartColors) -> None:
    pts = result.points
    if not pts:
        return
    base = pts[0]
    legend = plot.addLegend(offset=(10, 10), labelTextColor=colors.text)
    xs = list(range(len(pts)))
    pre = [100.0 * p["prefill_tps"] / base["prefill_tps"] for p in pts]
    dec = [100.0 * p["decode_tps"] / base["decode_tps"] for p in pts]
    b1 = pg.BarGraphItem(x=[x - 0.18 for x in xs], height=pre, width=0.34, brush=PREFILL)
    b2 = pg.BarGraphItem(x=[x + 0.18 for x in xs], height=dec, width=0.34, brush=DECODE)
    plot.addItem(b1)
    plot.addItem(b2)
    legend.addItem(b1, "prefill")
    legend.addItem(b2, "decode")
    plot.addItem(pg.InfiniteLine(pos=100, angle=0, pen=pg.mkPen(ROOF, style=Qt.PenStyle.DashLine)))
    plot.getAxis("bottom").setTicks([[(x, p["variant"]) for x, p in zip(xs, pts, strict=False)]])
    plot.setLabel("left", f"% of {base['variant']}")


def make_plot(background: str = ON_WHITE.base) -> pg.PlotWidget:
    """A plot for sweep charts: a grid on y, no mouse panning or zooming, no menu."""
    w = pg.PlotWidget()
    w.setBackground(background)
    w.showGrid(x=False, y=True, alpha=0.25)
    w.setMenuEnabled(False)
    w.setMouseEnabled(x=False, y=False)
    w.hideButtons()
    w.setMinimumHeight(300)
    for name in ("left", "bottom"):
        # The units are in the axis titles: pyqtgraph's own "(x0.001)" on a range under 1 (an empty or
        # cancelled sweep) reads as a wrong number.
        w.getAxis(name).enableAutoSIPrefix(False)
    return w


# The QApplication render_png had to create: kept alive for the next call (Qt allows one per process).
_keep: list[QApplication] = []


def render_png(result: SweepResult, path: str | Path, size: tuple[int, int] = (960, 560)) -> None:
    """Draw the chart and its finding offscreen and save a PNG (CLI `--png`, docs, tests)."""
    if QApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _keep.append(QApplication([]))
    box = QWidget()
    box.setStyleSheet("background: white;")
    lay = QVBoxLayout(box)
    plot = make_plot(ON_WHITE.base)
    lay.addWidget(plot, 1)
    label = QLabel(result.finding)
    label.setWordWrap(True)
    label.setStyleSheet("font-size: 13px; font-weight: 600; color: #202124; background: white;")
    lay.addWidget(label)
    draw_result(plot, result, ON_WHITE)
    box.resize(*size)
    box.ensurePolished()
    lay.activate()  # lay out without show(): grab() renders hidden widgets
    QApplication.processEvents()
    if not box.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    box.close()
    box.deleteLater()

