"""Live performance dashboard (a dock): prefill and decode kept apart, in one colour each, everywhere.

Per message: TTFT, prefill tok/s, decode tok/s, ITL percentiles, prompt tokens new vs reused. Across the
conversation: prefill tok/s and decode tok/s on two separate plots, TTFT vs prompt length. The current
reply's inter-token-latency histogram updates while it streams. Memory: KV cache used/allocated, headroom,
engine RSS (VRAM via NVML where there is one), system RAM. Roofline: measured bandwidth and compute roofs
with the prefill and decode operating points.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import psutil
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QGraphicsItem,
    QGridLayout,
    QGroupBox,
    QLabel,
    QProgressBar,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.core.metrics import PhaseMetrics, fmt_bytes, percentile
from app.engine import protocol as P
from app.ui import dashboard_live, roofline_model, theme
from app.ui.dashboard_reasoning import attach_reasoning_line
from app.ui.engine_qt import EngineQt

PLOT_HEIGHT = 150


def _fmt(v: float, digits: int = 0, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and (math.isnan(v) or v <= 0)):
        return "—"
    return f"{v:.{digits}f}{unit}"


_SI_PREFIX = {3: "k", 6: "M", 9: "G", 12: "T"}


def _ms(v: float) -> str:
    """Milliseconds, one decimal below 100 ms: short enough for a card."""
    return _fmt(v, 1 if v < 100 else 0)


def _si(v: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.1f} {unit}"
    return f"{v:.0f} "


class Card(QFrame):
    """A titled number: the at-a-glance part of the dashboard."""

    def __init__(self, title: str, color: str | None = None, tip: str = ""):
        super().__init__()
        self.setObjectName("card")
        self.color = color
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.setSpacing(0)
        self.title = QLabel(title)
        self.value = QLabel("—")
        self.detail = QLabel("")
        font = self.value.font()
        font.setPointSizeF(font.pointSizeF() * 1.45)
        font.setBold(True)
        self.value.setFont(font)
        for w in (self.title, self.value, self.detail):
            # Let the dock be narrow: labels may be cut rather than force a horizontal scroll bar.
            w.setMinimumWidth(1)
            w.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
            # One line each, always: a label that grew or shrank (empty ↔ text) would re-lay out the whole
            # dashboard, and every plot resized is a full pyqtgraph redraw (~10 ms each) mid-reply.
            w.setFixedHeight(w.fontMetrics().lineSpacing() + 2)
            lay.addWidget(w)
        self.setToolTip(tip)
        self.restyle()

    def restyle(self) -> None:
        c = theme.colors()
        self.setStyleSheet(f"QFrame#card {{ border: 1px solid {c.border}; border-radius: 6px; }}")
        self.title.setStyleSheet(f"color: {c.muted};")
        self.detail.setStyleSheet(f"color: {c.muted};")
        self.value.setStyleSheet(f"color: {self.color or c.text};")

    def set(self, value: str, detail: str = "") -> None:
        self.value.setText(value)
        self.detail.setText(detail)
        self.detail.setToolTip(detail)  # a narrow dock cuts the line: the whole of it on hover


PLOTS_AFTER_MS = 20  # > one frame: the window paints what changed before the next piece of work


def nice_ceiling(v: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above `v` (> 0): axis ranges that change rarely while data
    grows (a range change redraws the axes' tick text: ~10 ms in software, 25× the bars themselves)."""
    exp = 10.0 ** math.floor(math.log10(v))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * exp >= v * (1 - 1e-12):
            return step * exp
    return 10.0 * exp


def _plot(title: str, left: str, bottom: str) -> pg.PlotWidget:
    w = pg.PlotWidget()
    # A fixed height: when a wrapped label elsewhere changes height, the dashboard scrolls a little instead
    # of squeezing every plot (each resize is a full pyqtgraph re-layout and redraw, ~10 ms, mid-reply).
    w.setFixedHeight(PLOT_HEIGHT + 40)
    w.setTitle(title, size="9pt")
    w.setLabel("left", left)
    w.setLabel("bottom", bottom)
    w.showGrid(x=True, y=True, alpha=0.25)
    w.setMenuEnabled(False)
    w.setMouseEnabled(x=False, y=False)
    w.hideButtons()
    for name in ("left", "bottom"):
        # Axes are drawn once into a pixmap and reused until their range changes: replaying their tick text
        # (shaped by HarfBuzz on every paint) was the largest part of a live-plot update.
        w.getPlotItem().getAxis(name).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    return w


def _empty_label(plot: pg.PlotWidget, text: str) -> QLabel:
    """A centred hint over an empty plot (hidden once it has data)."""
    label = QLabel(text, plot)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
    label.setStyleSheet("color: #80868b; background: transparent;")
    lay = QVBoxLayout(plot)
    lay.addWidget(label)
    return label


class Dashboard(QWidget):
    """The dashboard's content; `DashboardDock` puts it in a dock with a scroll area."""

    def __init__(self, engine: EngineQt, parent: QWidget | None = None):
        super().__init__(parent)
        self.engine = engine
        self.loaded: P.Loaded | None = None
        self.history: list[PhaseMetrics] = []
        self.bandwidth: float | None = None
        self.bandwidth_note = "not measured yet"
        self.calibrated_peak: float | None = None
        self.n_ubatch = 512
        self._live_times: list[float] = []
        self._prefilled: P.Prefilled | None = None  # this reply's prefill, known from its first token
        self._reply_started: float | None = None
        self._itl_drawn_at = 0.0
        self._itl_gaps: list[float] = []
        self._itl_ranges: tuple[float, float] | None = None  # (x, y) upper limits now shown
        self._last_stats: P.Stats | None = None
        self._nvml: Any = None
        self._nvml_tried = False

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(8)

        # --- per message cards
        grid = QGridLayout()
        grid.setSpacing(6)
        self.card_ttft = Card("TTFT", None, "Time to first token (wall clock): what the user waits for")
        self.card_prefill = Card("Prefill", theme.PREFILL,
                                 "Prompt processing rate: compute-bound, sets the time to first token")
        self.card_decode = Card("Decode", theme.DECODE,
                                "Generation rate: one token at a time, memory-bandwidth-bound")
        self.card_itl = Card("Inter-token latency", None, "Gap between consecutive tokens (wall clock)")
        self.card_prompt = Card("Prompt tokens", None, "New tokens were evaluated; reused ones came from the KV cache")
        self.card_kv = Card("KV cache", None, "Tokens held in the KV cache and the room left")
        self.cards = [self.card_ttft, self.card_prefill, self.card_decode, self.card_itl, self.card_prompt,
                      self.card_kv]
        for i, card in enumerate(self.cards):
            grid.addWidget(card, i // 3, i % 3)
        lay.addLayout(grid)

        # --- time series: prefill and decode never blended, each on its own plot
        self.plot_prefill = _plot("Prefill tok/s per reply", "tok/s", "reply #")
        self.plot_decode = _plot("Decode tok/s per reply", "tok/s", "reply #")
        self.curve_prefill = self.plot_prefill.plot([], [], pen=pg.mkPen(theme.PREFILL, width=2), symbol="o",
                                                    symbolBrush=theme.PREFILL, symbolPen=None, symbolSize=7)
        self.curve_decode = self.plot_decode.plot([], [], pen=pg.mkPen(theme.DECODE, width=2), symbol="o",
                                                  symbolBrush=theme.DECODE, symbolPen=None, symbolSize=7)
        for plot in (self.plot_prefill, self.plot_decode):
            plot.getAxis("bottom").setTickSpacing(1, 1)  # replies are whole numbers
        self.plot_ttft = _plot("TTFT vs prompt length", "TTFT (ms)", "prompt tokens")
        self.scatter_ttft = pg.ScatterPlotItem(size=8, brush=pg.mkBrush(theme.PREFILL), pen=None)
        self.plot_ttft.addItem(self.scatter_ttft)
        self.plot_itl = _plot("Inter-token latency, current reply", "tokens", "ms")
        self.itl_bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=theme.DECODE, pen=None)
        self.plot_itl.addItem(self.itl_bars)
        self.itl_lines: list[pg.InfiniteLine] = []
        for style, where in ((Qt.PenStyle.SolidLine, 0.9), (Qt.PenStyle.DashLine, 0.7)):
            line = pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen("#888888", width=1, style=style), label="",
                                   labelOpts={"position": where, "anchors": [(1, 0.5), (1, 0.5)]})
            line.setVisible(False)
            self.plot_itl.addItem(line)
            self.itl_lines.append(line)
        self.empty_labels = {w: _empty_label(w, "no replies yet") for w in
                             (self.plot_prefill, self.plot_decode, self.plot_ttft)}
        self.empty_labels[self.plot_itl] = _empty_label(self.plot_itl, "tokens appear here while a reply streams")
        for group, widgets in (("Speed across the conversation", [self.plot_prefill, self.plot_decode]),
                               ("Latency", [self.plot_ttft, self.plot_itl])):
            box = QGroupBox(group)
            bl = QVBoxLayout(box)
            bl.setContentsMargins(4, 4, 4, 4)
            for w in widgets:
                bl.addWidget(w)
            lay.addWidget(box)

        # --- memory
        mem = QGroupBox("Memory")
        ml = QGridLayout(mem)
        self.kv_bar = QProgressBar()
        self.kv_label = QLabel("—")
        self.kv_label.setWordWrap(True)
        self.swa_label = QLabel("")
        self.swa_label.setWordWrap(True)
        self.engine_label = QLabel("—")
        self.vram_label = QLabel("")
        self.ram_bar = QProgressBar()
        self.ram_label = QLabel("—")
        ml.addWidget(QLabel("KV cache"), 0, 0)
        ml.addWidget(self.kv_bar, 0, 1)
        ml.addWidget(self.kv_label, 1, 0, 1, 2)
        ml.addWidget(self.swa_label, 2, 0, 1, 2)
        ml.addWidget(QLabel("System RAM"), 3, 0)
        ml.addWidget(self.ram_bar, 3, 1)
        ml.addWidget(self.ram_label, 4, 0, 1, 2)
        ml.addWidget(self.engine_label, 5, 0, 1, 2)
        ml.addWidget(self.vram_label, 6, 0, 1, 2)
        lay.addWidget(mem)

        # --- roofline
        roof = QGroupBox("Roofline")
        rl = QVBoxLayout(roof)
        rl.setContentsMargins(4, 4, 4, 4)
        self.plot_roof = _plot("", "FLOP/s", "arithmetic intensity (FLOPs/byte)")
        self.plot_roof.setFixedHeight(PLOT_HEIGHT + 80)
        self.plot_roof.setLogMode(x=True, y=True)
        self.plot_roof.showGrid(x=True, y=True, alpha=0.2)
        self.roof_curve = self.plot_roof.plot([], [], pen=pg.mkPen(theme.ROOF, width=2))
        for axis in ("left", "bottom"):
            self.plot_roof.getAxis(axis).enableAutoSIPrefix(False)
        # PlotDataItems (not bare scatter items): only they follow the plot's log mode.
        self.roof_prefill = self.plot_roof.plot([], [], pen=None, symbol="o", symbolSize=12,
                                                symbolBrush=theme.PREFILL, symbolPen=None)
        self.roof_decode = self.plot_roof.plot([], [], pen=None, symbol="s", symbolSize=11,
                                               symbolBrush=theme.DECODE, symbolPen=None)
        self.roof_empty = _empty_label(self.plot_roof, "send a message to place prefill and decode")
        rl.addWidget(self.plot_roof)
        self.roof_label = QLabel("")
        self.roof_label.setWordWrap(True)
        rl.addWidget(self.roof_label)
        self.roof_legend = QLabel(
            f"<span style='color:{theme.PREFILL}'>●</span> prefill &nbsp; "
            f"<span style='color:{theme.DECODE}'>■</span> decode &nbsp; "
            f"<span style='color:{theme.ROOF}'>━</span> roof = min(compute peak, bandwidth × intensity)")
        rl.addWidget(self.roof_legend)
        self.roof_explain = QLabel(
            "Decode reads every weight for each token, so it sits on the bandwidth slope; prefill reuses each "
            "weight for a whole batch of prompt tokens, so it climbs toward the compute roof.")
        self.roof_explain.setWordWrap(True)
        rl.addWidget(self.roof_explain)
        lay.addWidget(roof)
        lay.addStretch(1)

        self._live_timer = QTimer(self)
        self._live_timer.setSingleShot(True)
        self._live_timer.setInterval(engine.pacing.cards_ms)
        self._live_timer.timeout.connect(self._refresh_live)
        self._staged = QTimer(self)  # the per-reply plots, a frame after the reply's numbers
        self._staged.setSingleShot(True)
        self._staged.timeout.connect(self._next_stage)
        self._stage = 0
        self._poll = QTimer(self)
        self._poll.setInterval(1000)
        self._poll.timeout.connect(self.poll)
        self._poll.start()
        engine.stats.connect(self.on_stats)
        engine.loaded.connect(self.set_loaded)
        engine.prefilled.connect(self.on_prefilled)
        attach_reasoning_line(engine, self.card_ttft)  # after the reply's numbers: add first answer, thinking
        self.restyle()
        self.poll()
        self._update_roofline()

    # ------------------------------------------------------------------ inputs
    def set_loaded(self, loaded: P.Loaded) -> None:
        self.loaded = loaded
        self._update_kv(None)
        self._update_roofline()

    def set_bandwidth(self, bytes_per_s: float | None, note: str = "") -> None:
        self.bandwidth = bytes_per_s
        self.bandwidth_note = note or ("measured" if bytes_per_s else "not measured yet")
        self._update_roofline()

    def set_history(self, metrics: list[PhaseMetrics]) -> None:
        self.history = list(metrics)
        self._staged.stop()
        self._live_timer.stop()
        self._live_times = []
        self._update_series()
        self._show_message(self.history[-1] if self.history else None)
        self._set_itl(list(self.history[-1].itl_ms) if self.history else [])
        self._update_kv(None)

    def add_metrics(self, m: PhaseMetrics) -> None:
        """A reply ended: its numbers at once; the plots in two later frames. Redrawing all five plots in
        software takes ~25 ms; together with the reply's final render that was one 45–50 ms stall at the end
        of every reply (scripts/bench_gui), now three pieces the event loop runs between."""
        self.history.append(m)
        self._live_timer.stop()
        self._live_times = []
        self._prefilled = None
        self._show_message(m)
        self._update_kv(None)
        self._stage = 0
        self._staged.start(PLOTS_AFTER_MS)

    def _next_stage(self) -> None:
        if self._stage == 0:
            self._update_series()  # prefill, decode, TTFT and the roofline
            self._stage = 1
            self._staged.start(PLOTS_AFTER_MS)
        elif self.history:
            self._set_itl(self.history[-1].itl_ms)  # the finished reply's histogram

    def start_reply(self) -> None:
        if self._staged.isActive():  # a reply that ended a moment ago: finish its plots first
            self._staged.stop()
            if self._stage == 0:
                self._update_series()
        self._reply_started = time.monotonic()
        self._live_timer.stop()
        self._live_times = []
        self._prefilled = None
        self._set_itl([])
        for card in (self.card_ttft, self.card_prefill, self.card_decode, self.card_itl, self.card_prompt):
            card.set("…", "waiting for token 1")
        self.card_kv.detail.setText("grows from token 1")

    def on_prefilled(self, ev: P.Prefilled) -> None:
        """The prefill phase ended (first token): its cards are final now, the KV cache starts growing."""
        self._prefilled = ev
        (pv, pd), (tv, td) = dashboard_live.prefill_texts(ev)
        self.card_prefill.set(pv, pd)
        self.card_prompt.set(tv, td)
        self._show_live_kv()

    def _show_live_kv(self) -> None:
        if self._prefilled is None or self.loaded is None:
            return
        kv = dashboard_live.live_kv(self._prefilled, len(self._live_times), self.loaded)
        dashboard_live.show_kv(kv, self.loaded, self.card_kv, self.kv_bar, self.kv_label)

    def on_tokens(self, times: list[float]) -> None:
        """Live update while streaming, from the engine's token timestamps: the cards 4×/s and the histogram
        2×/s (half that where llama.cpp takes every core: app.core.pacing)."""
        first = not self._live_times
        self._live_times.extend(times)
        if first:
            self._refresh_live(first=True)
        elif not self._live_timer.isActive():
            self._live_timer.start(self.engine.pacing.cards_ms)

    def _refresh_live(self, first: bool = False) -> None:
        t = self._live_times
        if first and t and self._reply_started is not None:
            # Engine timestamps share the GUI's monotonic clock (same machine): a live TTFT as seen here.
            self.card_ttft.set(f"{1000 * (t[0] - self._reply_started):.0f} ms", "live; final at the end")
        gaps = [1000.0 * (b - a) for a, b in itertools.pairwise(t)]
        now = time.monotonic()
        if first or now - self._itl_drawn_at >= self.engine.pacing.histogram_ms / 1000.0:
            self._itl_drawn_at = now
            self._set_itl(gaps)
        elif len(gaps) != len(self._itl_gaps) and not self._live_timer.isActive():
            self._live_timer.start()  # come back for the histogram, even if no more tokens arrive
        self._show_live_kv()
        if len(t) >= 2 and t[-1] > t[0]:
            rate = (len(t) - 1) / (t[-1] - t[0])
            self.card_decode.set(f"{rate:.1f} tok/s", f"live, {len(t)} tokens")
            self.card_itl.set(f"{percentile(gaps, 50):.1f} ms",
                              f"p95 {_ms(percentile(gaps, 95))} · p99 {_ms(percentile(gaps, 99))}")

    def on_stats(self, stats: P.Stats) -> None:
        self._last_stats = stats
        self._update_kv(stats)
        self.engine_label.setText(f"Engine process: {fmt_bytes(stats.rss_bytes)} resident")

    # ------------------------------------------------------------------ rendering
    def _show_message(self, m: PhaseMetrics | None) -> None:
        if m is None:
            for card in (self.card_ttft, self.card_prefill, self.card_decode, self.card_itl, self.card_prompt):
                card.set("—", "")
            return
        if m.source.startswith("client-side"):  # a remote server: its prefill is hidden inside TTFT
            self.card_ttft.set(_fmt(m.ttft_ms, 0, " ms"), "client-side")
            self.card_prefill.set("n/a", "inside TTFT (remote)")
        else:
            self.card_ttft.set(_fmt(m.ttft_ms, 0, " ms"), f"total {m.total_ms / 1000:.1f} s")
            self.card_prefill.set(_fmt(m.prefill_tps, 0, " tok/s"),
                                  f"{m.prefill_tokens} tok in {m.prefill_ms:.0f} ms")
        detail = f"{m.decode_tokens} tok in {m.decode_ms:.0f} ms"
        if m.draft_tokens:  # prompt lookup was on: how many drafted tokens the model agreed with
            detail += f" · lookup {100 * m.draft_acceptance:.0f} % accepted"
        self.card_decode.set(_fmt(m.decode_tps, 1, " tok/s"), detail)
        self.card_itl.set(_fmt(m.itl_p50, 1, " ms"), f"p95 {_ms(m.itl_p95)} · p99 {_ms(m.itl_p99)} ms")
        new = m.prompt_tokens - m.reused_tokens
        if m.source.startswith("client-side") and not m.prompt_tokens:
            self.card_prompt.set("n/a", "not reported")
        else:
            self.card_prompt.set(f"{m.prompt_tokens}", f"{new} new · {m.reused_tokens} reused")

    def _update_series(self) -> None:
        xs = list(range(1, len(self.history) + 1))
        # Replies from a remote server have no visible prefill rate or (often) prompt length: leave them out
        # of those plots rather than plot zeros.
        local = [(x, m) for x, m in zip(xs, self.history) if not m.source.startswith("client-side")]
        self.curve_prefill.setData([x for x, _ in local], [m.prefill_tps for _, m in local])
        self.curve_decode.setData(xs, [m.decode_tps for m in self.history])
        counted = [m for m in self.history if m.prompt_tokens > 0]
        self.scatter_ttft.setData([m.prompt_tokens for m in counted], [m.ttft_ms for m in counted])
        # Rates start at zero: honest proportions, and a flat series gets sane ticks.
        for plot, values in ((self.plot_prefill, [m.prefill_tps for m in self.history]),
                             (self.plot_decode, [m.decode_tps for m in self.history])):
            plot.setXRange(0.5, max(len(xs), 3) + 0.5, padding=0)
            plot.setYRange(0, max(values + [1.0]) * 1.15, padding=0)
        ttfts = [m.ttft_ms for m in self.history]
        self.plot_ttft.setYRange(0, max(ttfts + [1.0]) * 1.15, padding=0)
        for plot in (self.plot_prefill, self.plot_decode, self.plot_ttft):
            self.empty_labels[plot].setVisible(not xs)
        self._update_roofline()

    def _set_itl(self, gaps_ms: list[float]) -> None:
        self._itl_gaps = list(gaps_ms)
        self.empty_labels[self.plot_itl].setVisible(not gaps_ms)
        for line in self.itl_lines:
            line.setVisible(bool(gaps_ms))
        if not gaps_ms:
            self.itl_bars.setOpts(x0=[], x1=[], height=[])
            return
        arr = np.asarray(gaps_ms, dtype=float)
        # A few stalls (another process took the CPU) must not squash the bulk into one bar:
        # the range ends at 3× the median (or the max if smaller); slower gaps pile up in the last bin.
        # Both ranges move in nice steps, so a live update rarely redraws the axes.
        # percentile, not np.median: its first call imports numpy.ma (50 ms to over a second, mid-reply)
        hi = nice_ceiling(max(min(float(arr.max()) * 1.05, 3.0 * percentile(gaps_ms, 50)), 1.0))
        counts, edges = np.histogram(np.clip(arr, 0, hi), bins=30, range=(0, hi))
        self.itl_bars.setOpts(x0=edges[:-1], x1=edges[1:], height=counts)
        ranges = (hi, nice_ceiling(max(float(counts.max()), 1.0) * 1.1))
        if ranges != self._itl_ranges:
            self._itl_ranges = ranges
            self.plot_itl.setXRange(0, hi, padding=0.02)
            self.plot_itl.setYRange(0, ranges[1], padding=0)
        for q, line in zip((50, 99), self.itl_lines, strict=True):
            v = percentile(gaps_ms, q)
            line.setPos(min(v, hi))
            line.label.setFormat(f"p{q} {v:.0f} ms")  # pyqtgraph skips an unchanged text

    def _update_kv(self, stats: P.Stats | None) -> None:
        stats = stats or self._last_stats
        loaded = self.loaded
        if loaded is None:
            self.kv_label.setText("No model loaded.")
            self.kv_bar.setValue(0)
            self.swa_label.setText("")
            self.card_kv.set("—", "")
            return
        if loaded.chat_template_source == "server":
            self.kv_label.setText("The KV cache lives on the remote server: not visible from here.")
            self.kv_bar.setValue(0)
            self.swa_label.setText("")
            self.card_kv.set("n/a", "remote server")
            return
        cells_alloc = stats.kv_cells_allocated if stats and stats.loaded else loaded.kv_cells_allocated
        bytes_alloc = stats.kv_bytes_allocated if stats and stats.loaded else loaded.kv_bytes_allocated
        cells_used = stats.kv_cells_used if stats and stats.loaded else 0
        bytes_used = stats.kv_bytes_used if stats and stats.loaded else 0
        if self.history and (stats is None or not stats.loaded):
            cells_used, bytes_used = self.history[-1].kv_cells_used, self.history[-1].kv_bytes_used
        n_ctx = loaded.n_ctx
        headroom = max(n_ctx - cells_used, 0)
        self.kv_bar.setRange(0, max(cells_alloc, 1))
        self.kv_bar.setValue(min(cells_used, max(cells_alloc, 1)))
        self.kv_bar.setFormat(f"{cells_used} / {cells_alloc} cells")
        self.kv_label.setText(
            f"{fmt_bytes(bytes_used)} used of {fmt_bytes(bytes_alloc)} allocated "
            f"({loaded.type_k}/{loaded.type_v}) · headroom {headroom} tokens of {n_ctx}")
        self.card_kv.set(f"{cells_used} tok", f"{headroom} tokens free")
        self.swa_label.setText(dashboard_live.swa_note(loaded))

    def poll(self) -> None:
        """1 Hz: system RAM (psutil), engine RSS (psutil on its pid), VRAM (NVML), KV stats (engine)."""
        vm = psutil.virtual_memory()
        self.ram_bar.setRange(0, 1000)
        self.ram_bar.setValue(int(1000 * (vm.total - vm.available) / max(vm.total, 1)))
        self.ram_bar.setFormat(f"{100 * (vm.total - vm.available) / max(vm.total, 1):.0f} %")
        self.ram_label.setText(f"{fmt_bytes(vm.total - vm.available)} used of {fmt_bytes(vm.total)}, "
                               f"{fmt_bytes(vm.available)} available")
        pid = self.engine.pid
        if pid is None:
            self.engine_label.setText("Engine process: not running")
        else:
            try:
                rss = psutil.Process(pid).memory_info().rss
                self.engine_label.setText(f"Engine process (pid {pid}): {fmt_bytes(rss)} resident")
            except psutil.Error:
                pass
            self.engine.request_stats()
        self.vram_label.setText(self._vram_text(pid))

    def _vram_text(self, pid: int | None) -> str:
        if not self._nvml_tried:
            self._nvml_tried = True
            try:
                import pynvml

                pynvml.nvmlInit()
                self._nvml = pynvml
            except Exception:  # noqa: BLE001 (no NVIDIA driver, any NVML failure: the common CPU case)
                self._nvml = None
        if self._nvml is None:
            return "VRAM: no NVIDIA GPU (NVML unavailable)"
        nv = self._nvml
        try:
            parts = []
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                info = nv.nvmlDeviceGetMemoryInfo(h)
                mine = sum(p.usedGpuMemory or 0 for p in nv.nvmlDeviceGetComputeRunningProcesses(h)
                           if pid is not None and p.pid == pid)
                parts.append(f"GPU{i}: engine {fmt_bytes(mine)}, {fmt_bytes(info.used)} / {fmt_bytes(info.total)}")
            return "VRAM: " + "; ".join(parts) if parts else "VRAM: no GPU"
        except Exception as exc:  # noqa: BLE001 (NVML errors must not break the dashboard)
            return f"VRAM: unavailable ({exc})"

    def _update_roofline(self) -> None:
        loaded = self.loaded
        if loaded is None:
            self.roof_label.setText("Load a model to see where prefill and decode sit.")
            return
        r = roofline_model.build(self.history, loaded.n_params, loaded.model_size, self.bandwidth,
                                 self.calibrated_peak, self.n_ubatch)
        pts = [p for p in (r.prefill, r.decode) if p is not None]
        lo = min([p.intensity for p in pts] + [0.5]) / 3
        hi = max([p.intensity for p in pts] + [(r.ridge or 1) * 4, 50.0]) * 3
        xs = np.logspace(math.log10(lo), math.log10(hi), 80)
        ys = [r.roof(x) for x in xs]
        if all(y is not None and math.isfinite(y) for y in ys):
            self.roof_curve.setData(xs, ys)
        else:
            self.roof_curve.setData([], [])
            ys = []
        y_values = [y for y in ys if y] + [p.flops for p in pts]
        self._decade_ticks("bottom", [lo, hi], "")
        if y_values:
            self._decade_ticks("left", [min(y_values), max(y_values)], "FLOP/s")
        self.roof_prefill.setData([r.prefill.intensity] if r.prefill else [],
                                  [r.prefill.flops] if r.prefill else [])
        self.roof_decode.setData([r.decode.intensity] if r.decode else [],
                                 [r.decode.flops] if r.decode else [])
        self.roof_empty.setVisible(not pts)
        bw = f"{self.bandwidth / 1e9:.1f} GB/s ({self.bandwidth_note})" if self.bandwidth else \
            f"{self.bandwidth_note}"
        peak = f"{_si(r.peak_flops)}FLOP/s ({r.peak_source})" if r.peak_flops else r.peak_source
        text = f"Bandwidth roof: {bw} · compute roof: {peak}"
        if r.decode and self.bandwidth:
            used = r.decode.flops / r.decode.intensity
            text += f" · decode moves {used / 1e9:.1f} GB/s = {100 * used / self.bandwidth:.0f} % of the roof"
        self.roof_label.setText(text)

    def _decade_ticks(self, axis: str, values: list[float], unit: str) -> None:
        """Label a log axis at powers of ten only (pyqtgraph's minor labels pile up into a column)."""
        lo = math.floor(math.log10(max(min(values), 1e-30)))
        hi = math.ceil(math.log10(max(max(values), 1e-30)))

        def label(e: int) -> str:
            if not unit or e < 3:
                return f"{10.0 ** e:g}"
            prefix_exp = min(e // 3 * 3, 12)
            return f"{10 ** (e - prefix_exp)} {_SI_PREFIX[prefix_exp]}"

        major = [(float(e), label(e)) for e in range(lo, hi + 1)]
        minor: list[tuple[float, str]] = []
        if hi - lo <= 2:  # a narrow range shows one decade at most: label 2× and 5× too
            minor = [(e + math.log10(m), label(e).replace("1", str(m), 1)) for e in range(lo, hi) for m in (2, 5)]
        self.plot_roof.getAxis(axis).setTicks([major, minor])

    def restyle(self) -> None:
        c = theme.colors()
        for card in self.cards:
            card.restyle()
        for plot in (self.plot_prefill, self.plot_decode, self.plot_ttft, self.plot_itl, self.plot_roof):
            plot.setBackground(c.base)
            for axis in ("left", "bottom"):
                ax = plot.getAxis(axis)
                ax.setPen(pg.mkPen(c.muted))
                ax.setTextPen(pg.mkPen(c.text))
            plot.getPlotItem().titleLabel.setText(plot.getPlotItem().titleLabel.text, color=c.text)
        for label in (self.roof_explain, self.swa_label):
            label.setStyleSheet(f"color: {c.muted};")
        for line in self.itl_lines:
            line.setPen(pg.mkPen(c.text, width=1, style=line.pen.style()))
            line.label.setColor(c.text)


class DashboardDock(QDockWidget):
    def __init__(self, engine: EngineQt, parent: QWidget | None = None):
        super().__init__("Performance", parent)
        self.setObjectName("dashboard")
        self.dashboard = Dashboard(engine)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(self.dashboard)
        self.setWidget(scroll)
        self.setMinimumWidth(470)
