"""The dashboard widget: per-message cards, speed and latency plots, memory and roofline boxes, kept up to date
from the engine's events (live while a reply streams, in staged frames when it ends); `DashboardDock` puts it
in a dock with a scroll area. The reply being written, followed even while another chat is shown, is the part
in app.ui.dashboard.live_reply.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QGroupBox,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.core.metrics.phase import PhaseMetrics, fmt_bytes, percentile
from app.core.predict.machine_roofs import MachineRoofs
from app.engine import protocol as P
from app.ui.dashboard import roofline_math
from app.ui.dashboard.cards import Card, CardGrid, show_message
from app.ui.dashboard.context_line import context_line
from app.ui.dashboard.live_reply import LiveReply
from app.ui.dashboard.memory import MemoryPanel
from app.ui.dashboard.plots import empty_label, make_plot, nice_ceiling, restyle_empty_label, restyle_plot
from app.ui.dashboard.reasoning_line import reasoning_line
from app.ui.dashboard.roofline import RooflinePanel
from app.ui.dashboard.server_view import RemoteServerPanel, ServerLink
from app.ui.dashboard.slow_line import SlowLine
from app.ui.dashboard.speculative_line import speedup_line
from app.ui.dashboard.traffic import ServerTrafficPanel
from app.ui.engine_link.engine_qt import EngineQt
from app.ui.toolkit import theme

DOCK_MIN_WIDTH = 250  # with the chat and the sidebar, the window still fits 800 px
PLOTS_AFTER_MS = 20  # > one frame: the window paints what changed before the next piece of work
TTFT_EMPTY_TOKENS = 100.0  # the TTFT plot's prompt axis with no replies: a neutral 0-100 tokens


class Dashboard(QWidget, LiveReply):
    """The dashboard's content; `DashboardDock` puts it in a dock with a scroll area."""

    live_kv_changed = Signal(object)  # dashboard_live.LiveKV: the KV cache while a reply streams

    def __init__(self, engine: EngineQt, parent: QWidget | None = None):
        super().__init__(parent)
        self.engine = engine
        self._init_state()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(8)
        self.server_traffic = ServerTrafficPanel()  # shown only while the window serves the model
        lay.addWidget(self.server_traffic)
        self.remote_server = RemoteServerPanel()  # shown only while a remote server is polled
        lay.addWidget(self.remote_server)
        lay.addWidget(self._build_cards())
        self.slow_line = SlowLine(engine)  # under the cards: why the last reply ran under its prediction
        lay.addWidget(self.slow_line)
        self._build_speed_plots()
        self._build_latency_plots()
        self._add_plot_boxes(lay)
        lay.addWidget(self._build_memory())
        lay.addWidget(self._build_roofline())
        lay.addStretch(1)
        self._build_timers(engine)
        self._wire_engine(engine)
        self.restyle()
        self.poll()
        self._update_series()  # the empty plots' ranges, as an empty chat shows them; and the roofline

    # ------------------------------------------------------------------ building
    def _init_state(self) -> None:
        """What the dashboard knows of the model, the machine and the replies, before any event."""
        self.loaded: P.Loaded | None = None
        self.history: list[PhaseMetrics] = []
        self.machine_roofs: MachineRoofs | None = None  # the loaded model's roofs on this machine (machine_roofs)
        self.device_roofs: dict[str, roofline_math.DeviceRoof] = {}  # measured GPUs by llama.cpp's device name
        self.n_ubatch = 512
        self._live_times: list[float] = []  # the reply being written: its token times so far
        self._prefilled: P.Prefilled | None = None  # this reply's prefill, known from its first token
        self._prefill_progress: tuple[str, str] | None = None  # (value, detail) of a long prefill so far
        self._reply_started: float | None = None
        self._live_shown = False  # the reply being written is the shown chat's: its numbers are on the cards
        self._itl_drawn_at = 0.0
        self._itl_gaps: list[float] = []
        self._itl_ranges: tuple[float, float] | None = None  # (x, y) upper limits now shown
        self._last_stats: P.Stats | None = None

    def _build_cards(self) -> CardGrid:
        """The per-message cards."""
        self.card_ttft = Card("TTFT", None, "Time to first token (wall clock): what the user waits for")
        self.card_prefill = Card("Prefill", theme.PREFILL,
                                 "Prompt processing rate: compute-bound, sets the time to first token")
        self.card_decode = Card("Decode", theme.DECODE,
                                "Generation rate: one token at a time, memory-bandwidth-bound")
        self.card_itl = Card("Inter-token latency", None, "Gap between consecutive tokens (wall clock): the median, "
                             "and the mean, which is the Decode card's time per token")
        self.card_prompt = Card("Prompt tokens", None, "New tokens were evaluated; reused ones came from the KV cache")
        self.card_kv = Card("KV cache", None, "This chat's tokens in the context (its prompt and replies) and the "
                            "room left; the Memory box shows the engine's cache now, whichever chat filled it. "
                            "The reply's last token is not in the cache yet (it goes in with the next message): "
                            "the context line under the input counts it, one more")
        self.cards = [self.card_ttft, self.card_prefill, self.card_decode, self.card_itl, self.card_prompt,
                      self.card_kv]
        self.card_grid = CardGrid(self.cards)
        return self.card_grid

    def _build_speed_plots(self) -> None:
        """Prefill and decode speed per reply: never blended, each on its own plot."""
        self.plot_prefill = make_plot("Prefill tok/s per reply", "tok/s", "reply #")
        self.plot_decode = make_plot("Decode tok/s per reply", "tok/s", "reply #")
        self.curve_prefill = self.plot_prefill.plot([], [], pen=pg.mkPen(theme.PREFILL, width=2), symbol="o",
                                                    symbolBrush=theme.PREFILL, symbolPen=None, symbolSize=7)
        self.curve_decode = self.plot_decode.plot([], [], pen=pg.mkPen(theme.DECODE, width=2), symbol="o",
                                                  symbolBrush=theme.DECODE, symbolPen=None, symbolSize=7)
        for plot in (self.plot_prefill, self.plot_decode):
            plot.getAxis("bottom").setTickSpacing(1, 1)  # replies are whole numbers

    def _build_latency_plots(self) -> None:
        """TTFT against prompt length, and the current reply's inter-token latency with its percentile lines."""
        self.plot_ttft = make_plot("TTFT vs prompt length", "TTFT (ms)", "prompt tokens")
        self.scatter_ttft = pg.ScatterPlotItem(size=8, brush=pg.mkBrush(theme.PREFILL), pen=None)
        self.plot_ttft.addItem(self.scatter_ttft)
        self.plot_itl = make_plot("Inter-token latency, current reply", "tokens", "ms")
        self.itl_bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=theme.DECODE, pen=None)
        self.plot_itl.addItem(self.itl_bars)
        self.itl_lines: list[pg.InfiniteLine] = []
        for style, where in ((Qt.PenStyle.SolidLine, 0.9), (Qt.PenStyle.DashLine, 0.7)):
            line = pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen(theme.colors().text, width=1, style=style), label="",
                                   labelOpts={"position": where, "anchors": [(1, 0.5), (1, 0.5)]})
            line.setVisible(False)
            self.plot_itl.addItem(line)
            self.itl_lines.append(line)

    def _add_plot_boxes(self, lay: QVBoxLayout) -> None:
        """The plots' empty-state texts, and the plots in their two boxes."""
        self.empty_labels = {w: empty_label(w, "no replies yet") for w in
                             (self.plot_prefill, self.plot_decode, self.plot_ttft)}
        self.empty_labels[self.plot_itl] = empty_label(self.plot_itl, "tokens appear here while a reply streams")
        for group, widgets in (("Speed across the conversation", [self.plot_prefill, self.plot_decode]),
                               ("Latency", [self.plot_ttft, self.plot_itl])):
            box = QGroupBox(group)
            bl = QVBoxLayout(box)
            bl.setContentsMargins(4, 4, 4, 4)
            for w in widgets:
                bl.addWidget(w)
            lay.addWidget(box)

    def _build_memory(self) -> MemoryPanel:
        """The memory box; its widgets are named here too (the tests and the window read them)."""
        self.memory = MemoryPanel()
        self.kv_bar, self.kv_label, self.swa_label = self.memory.kv_bar, self.memory.kv_label, self.memory.swa_label
        self.engine_label, self.vram_label = self.memory.engine_label, self.memory.vram_label
        self.ram_bar, self.ram_label = self.memory.ram_bar, self.memory.ram_label
        return self.memory

    def _build_roofline(self) -> RooflinePanel:
        """The roofline box, its widgets named here too."""
        self.roofline = RooflinePanel()
        r = self.roofline
        self.plot_roof, self.roof_curve, self.roof_empty = r.plot_roof, r.roof_curve, r.roof_empty
        self.roof_prefill, self.roof_decode = r.roof_prefill, r.roof_decode
        self.roof_label, self.roof_legend, self.roof_explain = r.roof_label, r.roof_legend, r.roof_explain
        return self.roofline

    def _build_timers(self, engine: EngineQt) -> None:
        """The live cards' pacing, the staged per-reply plots and the once-a-second poll (started)."""
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

    def _wire_engine(self, engine: EngineQt) -> None:
        """The engine's events to the dashboard (a reply's extra lines come from the window: show_reply_lines)."""
        engine.stats.connect(self.on_stats)
        engine.loaded.connect(self.set_loaded)
        engine.state_changed.connect(self._engine_state)  # an Eject, a dead engine: no model's numbers stay
        engine.prefilled.connect(self.on_prefilled)
        self.server_link = ServerLink(self)  # a remote server's own metrics: the Server view and the cards

    # ------------------------------------------------------------------ inputs
    def set_loaded(self, loaded: P.Loaded | None) -> None:
        """The model in use, or None once it is gone (the KV card and Memory box then say no model is loaded)."""
        self.loaded = loaded
        self.server_link.set_loaded(loaded)
        self._last_stats = None  # the cache they counted is gone with the load (which empties it)
        self._update_kv(None)
        self._update_roofline()

    def _engine_state(self, _state: str) -> None:
        if self.engine.loaded_info is None and self.loaded is not None:  # ejected, or the engine stopped
            self.set_loaded(None)

    def set_machine_roofs(self, roofs: MachineRoofs | None) -> None:
        self.machine_roofs = roofs
        self._update_roofline()

    def set_device_roofs(self, roofs: dict[str, roofline_math.DeviceRoof]) -> None:
        self.device_roofs = roofs
        self._update_roofline()

    def set_history(self, metrics: list[PhaseMetrics]) -> None:
        """A conversation is shown: its replies' numbers. A reply still being written is kept (not shown)
        for `resume_reply`."""
        self.history = list(metrics)
        self._staged.stop()
        self._live_timer.stop()
        self._live_shown = False
        if not self.slow_line.follows_engine:
            self.slow_line.show_line("")  # it explained a reply of the chat shown before, or none
        self._update_series()
        self._show_message(self.history[-1] if self.history else None)
        self._set_itl(list(self.history[-1].itl_ms) if self.history else [])
        self._update_kv(None)

    def replace_history(self, metrics: list[PhaseMetrics], redraw: bool = True) -> None:
        """The conversation's replies changed (one replaced, continued or removed): the series show the
        replies that exist, the cards stay as they are."""
        self.history = list(metrics)
        if redraw:
            self._update_series()

    def add_metrics(self, m: PhaseMetrics) -> None:
        """A reply ended: its numbers at once; the plots in two later frames. Redrawing all five plots in
        software takes ~25 ms; together with the reply's final render that was one 45–50 ms stall at the end
        of every reply (scripts/bench_gui), now three pieces the event loop runs between."""
        self.history.append(m)
        self.end_reply()
        self.server_link.on_reply(m)  # before the cards: a server's view of this reply goes over them
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

    def show_reply_lines(self, metrics: dict[str, Any], finish_reason: str) -> None:
        """The lines of the reply whose numbers the cards show (its Done.metrics), which PhaseMetrics know
        nothing of: first answer and thinking on TTFT, what drafting gained on Decode, turns left out and
        the context overflow on Prompt. The window calls it for the shown chat's last reply, when it ends and
        when its chat is opened again; hooked on the engine's Done, a reply that ended in a background chat
        wrote its lines on the chat shown."""
        self.card_ttft.add_detail(reasoning_line(metrics))
        self.card_decode.add_detail(speedup_line(metrics))
        self.card_prompt.add_detail(context_line(metrics, finish_reason))

    def start_reply(self) -> None:
        if self._staged.isActive():  # a reply that ended a moment ago: finish its plots first
            self._staged.stop()
            if self._stage == 0:
                self._update_series()
        self.end_reply()
        self.slow_line.show_line("")  # it explained the reply before: a Continue's live Decode contradicted it
        self._reply_started = time.monotonic()
        self._live_shown = True  # a reply starts in the chat on screen
        self._show_waiting()

    def on_stats(self, stats: P.Stats) -> None:
        self._last_stats = stats
        self._update_kv(stats)
        self.engine_label.setText(f"Engine process: {fmt_bytes(stats.rss_bytes)} resident")

    # ------------------------------------------------------------------ rendering
    def _show_message(self, m: PhaseMetrics | None) -> None:
        show_message(self.card_ttft, self.card_prefill, self.card_decode, self.card_itl, self.card_prompt, m)
        if m is not None:
            self.server_link.overlay()


    def _update_series(self) -> None:
        xs = list(range(1, len(self.history) + 1))
        # Replies from a remote server have no visible prefill rate or (often) prompt length, and a prompt
        # wholly in the cache evaluated nothing: leave them out of the rate plot rather than plot zeros.
        local = [(x, m) for x, m in zip(xs, self.history, strict=False)
                 if not m.source.startswith("client-side") and m.prefill_tokens > 0]
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
        # The prompt axis too starts at zero, in nice steps; left to pyqtgraph's auto range, an empty chat kept
        # the x range of the chat shown before (an empty scatter has no bounds to range on).
        longest = max((m.prompt_tokens for m in counted), default=0)
        self.plot_ttft.setXRange(0, nice_ceiling(longest * 1.05) if longest else TTFT_EMPTY_TOKENS, padding=0)
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
            line.setPos(min(v, hi))  # a stall's p99 past the range: at its edge, marked as off the scale
            line.label.setFormat(f"p{q} {v:.0f} ms" + (" →" if v > hi else ""))  # pyqtgraph skips an unchanged text

    def _update_kv(self, stats: P.Stats | None) -> None:
        self.memory.update_kv(self.loaded, stats or self._last_stats, self.history, self.card_kv)
        self.server_link.overlay()

    def poll(self) -> None:
        """1 Hz: system RAM, engine RSS, VRAM, KV stats (app.ui.dashboard.memory)."""
        self.memory.poll(self.engine)

    def _update_roofline(self) -> None:
        if self.server_link.update_roofline():  # a remote server: its phases on its own machine's roofs
            return
        device = roofline_math.weights_device(self.loaded.buffers_mib) if self.loaded is not None else None
        self.roofline.update_roofline(self.loaded, self.history, self.machine_roofs, self.n_ubatch,
                                      self.device_roofs.get(device or ""))


    def restyle(self) -> None:
        c = theme.colors()
        for card in self.cards:
            card.restyle()
        self.server_traffic.restyle()
        self.remote_server.restyle()
        for plot in (self.plot_prefill, self.plot_decode, self.plot_ttft, self.plot_itl, self.plot_roof):
            restyle_plot(plot, c.base, c.muted, c.text)
        for label in (self.roof_explain, self.swa_label):
            label.setStyleSheet(f"color: {c.muted};")
        for label in [*self.empty_labels.values(), self.roof_empty]:
            restyle_empty_label(label)
        self.slow_line.restyle()
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
        self.setMinimumWidth(DOCK_MIN_WIDTH)
