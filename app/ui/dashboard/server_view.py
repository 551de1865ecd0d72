"""The dashboard's Server view: a remote serving engine's own numbers (vLLM, SGLang, TensorRT-LLM,
llama-server, roofline serve, Ollama), polled by app.ui.engine_link.server_watch_qt.

Six cards — requests running and waiting, KV-cache use, the server's TTFT and ITL percentiles over the last
minute, its prefill and decode rates per request — and two plots over time: running and waiting requests, and
KV-cache use. `overlay_cards` writes the server's prefill, decode and KV beside the per-message cards, whose
TTFT and ITL stay the client's wall clock; each card says whose clock it is. Hidden while no server is polled.
`ServerLink` also places the server's phases on the Roofline box, against the remote GPU's roofs entered for
that server (never this machine's). Ollama's metrics have no phases: there the last reply's own (its native
API's numbers, in the reply's metrics) stand in for them.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import pyqtgraph as pg
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.core.files.untrusted import clean_line
from app.core.metrics.phase import PhaseMetrics
from app.core.remote.engines import OLLAMA
from app.core.remote.histogram import Distribution
from app.core.remote.measures import ServerMeasures
from app.core.remote.ollama import REPLY_SOURCE
from app.core.remote.roof_entry import RemoteServerRoofs
from app.core.remote.roofline import remote_roofline
from app.core.remote.text import dist, kv_line, ms, rate, requests_line, window
from app.ui.dashboard.cards import Card
from app.ui.dashboard.plots import make_plot, nice_ceiling, restyle_plot
from app.ui.engine_link.server_watch_qt import ServerWatchQt
from app.ui.toolkit import theme

HISTORY_POINTS = 300  # polls kept for the plots (ten minutes at one every 2 s)


class RemoteServerPanel(QGroupBox):
    def __init__(self, parent: QWidget | None = None):
        super().__init__("Server", parent)
        self.card_requests = Card("Requests", None, "Requests the server is running, and those queued for a slot")
        self.card_kv = Card("KV cache", None, "The server's KV-cache use (all requests, its own count)")
        self.card_ttft = Card("Server TTFT", None, "Time to first token on the server's clock, over the last "
                              "minute (queueing and prefill, no network)")
        self.card_itl = Card("Server ITL", None, "Inter-token latency on the server's clock, over the last minute")
        self.card_prefill = Card("Server prefill", theme.PREFILL, "Prompt tokens per second of one request, on the "
                                 "server's clock")
        self.card_decode = Card("Server decode", theme.DECODE, "Reply tokens per second of one request, on the "
                                "server's clock")
        self.cards = [self.card_requests, self.card_kv, self.card_ttft, self.card_itl, self.card_prefill,
                      self.card_decode]
        grid = QGridLayout()
        grid.setSpacing(6)
        for i, card in enumerate(self.cards):
            grid.addWidget(card, i // 2, i % 2)
        lay = QVBoxLayout(self)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Maximum)
        lay.addWidget(self.status)
        lay.addLayout(grid)
        self.plot_requests = make_plot("Requests (server)", "requests", "s ago")
        self.plot_requests.addLegend(offset=(8, 4), labelTextSize="8pt")
        self.curve_running = self.plot_requests.plot([], [], pen=pg.mkPen(theme.DECODE, width=2), name="running")
        self.curve_waiting = self.plot_requests.plot([], [], pen=pg.mkPen(theme.colors().warn, width=2),
                                                     name="waiting")
        self.plot_kv = make_plot("KV-cache use (server)", "%", "s ago")
        self.plot_kv.setYRange(0, 100, padding=0)
        self.curve_kv = self.plot_kv.plot([], [], pen=pg.mkPen(theme.PREFILL, width=2))
        lay.addWidget(self.plot_requests)
        lay.addWidget(self.plot_kv)
        self._history: collections.deque[tuple[float, int, int, float | None]] = collections.deque(
            maxlen=HISTORY_POINTS)
        self._y_max = 0.0
        self.last: ServerMeasures | None = None
        self.setVisible(False)

    def clear(self) -> None:
        """No server polled: hidden, emptied."""
        self.last = None
        self._history.clear()
        self._y_max = 0.0
        for curve in (self.curve_running, self.curve_waiting, self.curve_kv):
            curve.setData([], [])
        for card in self.cards:
            card.set("—", "")
        self.status.setText("")
        self.setTitle("Server")
        self.setVisible(False)

    def on_failed(self, why: str) -> None:
        self.setVisible(True)
        self.status.setText(clean_line(f"server metrics: {why}", 300))

    def on_measures(self, m: ServerMeasures, plot: bool = True) -> None:
        self.last = m
        self.setVisible(True)
        self.setTitle(f"Server · {m.source}")
        notes = "; ".join(m.notes)
        self.status.setText(clean_line(f"{window(m)}" + (f" · {notes}" if notes else ""), 300))
        self.card_requests.set(f"{m.running}" if m.running is not None else "—", requests_line(m))
        self._kv_card(m)
        self.card_ttft.set(ms(m.ttft.p50_ms) if m.ttft else "—", _tail(m.ttft))
        self.card_itl.set(ms(m.itl.p50_ms) if m.itl else "—", _tail(m.itl))
        reply = m.scope.startswith("last reply")  # Ollama's: the last reply's own rates (ServerLink.on_reply)
        self.card_prefill.set(rate(m.prefill_tps), "not reported" if m.prefill_tps is None else
                              "last reply" if reply else "per request")
        self.card_decode.set(rate(m.decode_tps), "not reported" if not m.decode_tps_from else
                             "last reply" if reply else f"per request ({m.decode_tps_from})")
        if plot:
            self._plot(m)

    def _kv_card(self, m: ServerMeasures) -> None:
        if m.kv_fraction is None and m.kv_tokens is None and m.memory_bytes:
            # Ollama gives no KV gauge; /api/ps's model memory and context are what it says of its cache
            gpu = f" · {m.memory_gpu_bytes / 2**30:.1f} GiB on the GPU" if m.memory_gpu_bytes is not None else ""
            self.card_kv.set(f"{m.memory_bytes / 2**30:.1f} GiB", f"model memory{gpu} · {kv_line(m)}")
            return
        kv_detail = kv_line(m).split(" · ", 1)[-1] if m.kv_tokens is not None or m.kv_capacity else "of its KV cache"
        self.card_kv.set(f"{100 * m.kv_fraction:.0f} %" if m.kv_fraction is not None else "—",
                         kv_detail if m.kv_fraction is not None or m.kv_tokens is not None else "not reported")

    def _plot(self, m: ServerMeasures) -> None:
        self._history.append((m.t, m.running or 0, m.waiting or 0, m.kv_fraction))
        xs = [p[0] - m.t for p in self._history]
        self.curve_running.setData(xs, [p[1] for p in self._history])
        self.curve_waiting.setData(xs, [p[2] for p in self._history])
        kv = [(x, 100 * p[3]) for x, p in zip(xs, self._history, strict=True) if p[3] is not None]
        self.curve_kv.setData([k[0] for k in kv], [k[1] for k in kv])
        top = nice_ceiling(max(1.0, *(max(p[1], p[2]) for p in self._history)))
        if top != self._y_max:  # a range change redraws the axes: only when the ceiling moves
            self._y_max = top
            self.plot_requests.setYRange(0, top, padding=0)

    def restyle(self) -> None:
        c = theme.colors()
        for card in self.cards:
            card.restyle()
        self.status.setStyleSheet(f"color: {c.muted};")
        for plot in (self.plot_requests, self.plot_kv):
            restyle_plot(plot, c.base, c.muted, c.text)
        self.curve_waiting.setPen(pg.mkPen(c.warn, width=2))  # queued requests, red in either theme


def _tail(d: Distribution | None) -> str:
    """p95 and p99 (the p50 is the card's value)."""
    text = dist(d)
    return text.split(" · ", 1)[1] if " · " in text else text


def overlay_cards(m: ServerMeasures | None, ttft: Card, prefill: Card, decode: Card, kv: Card) -> None:
    """The server's own prefill, decode and KV on the per-message cards of a remote chat, each labelled by its
    source; TTFT stays the client's wall clock and says so."""
    if m is None:
        return
    detail = ttft.detail.text()
    if not detail.startswith("client wall clock"):  # a remote reply's TTFT is always the client's (network in)
        keep = detail and not detail.startswith(("client-side", "total"))  # e.g. the thinking line's note
        ttft.detail.setText("client wall clock" + (f" · {detail}" if keep else ""))
    if m.prefill_tps is not None:
        prefill.set(rate(m.prefill_tps), m.source)
    elif m.prefill_time is not None and m.prefill_time.mean_ms is not None:
        prefill.set(ms(m.prefill_time.mean_ms), f"{m.source} · mean time")
    if m.decode_tps is not None:
        decode.detail.setText(f"{m.source}: {rate(m.decode_tps)}")
    if m.kv_fraction is not None or m.kv_tokens is not None:
        kv.set(f"{100 * m.kv_fraction:.0f} %" if m.kv_fraction is not None else f"{m.kv_tokens:,}",
               f"{m.source} · {kv_line(m)}")


class ServerLink:
    """The dashboard's link to a remote server's metrics: polls while a remote model is loaded (the engine's
    RemoteClient), feeds the Server view, and lays the server's numbers over the cards once a reply ended."""

    def __init__(self, dash: Any) -> None:
        self.dash = dash
        # The GPU roofs entered for a server (the window looks them up in its settings by URL)
        self.roofs_of: Callable[[str], RemoteServerRoofs | None] = lambda url: None
        self.watch = ServerWatchQt(dash)
        self.watch.measures.connect(self.on_measures)
        self.watch.failed.connect(dash.remote_server.on_failed)
        self.reply: PhaseMetrics | None = None  # the last reply's own numbers, from Ollama's native API
        self.polled: ServerMeasures | None = None  # the last poll as the server answered it

    def set_loaded(self, loaded: Any | None) -> None:
        """A model was loaded, or ejected (None): a server is polled only while its model is the one in use."""
        self.reply = self.polled = None
        self.dash.remote_server.clear()
        if loaded is None or loaded.chat_template_source != "server" or not self.watch.follow(self.dash.engine.client):
            self.watch.stop()

    def on_measures(self, m: ServerMeasures) -> None:
        self.polled = m
        self.dash.remote_server.on_measures(self._with_reply(m))
        self.overlay()
        self.update_roofline()

    def on_reply(self, metrics: PhaseMetrics) -> None:
        """A reply ended. Ollama's metrics (/api/ps) have no per-request rates: the last reply's own, from its
        native API, stand in for them on the Server view, the cards and the Roofline box."""
        self.reply = metrics if metrics.source == REPLY_SOURCE else None
        if self.polled is not None and self.polled.engine == OLLAMA:
            self.dash.remote_server.on_measures(self._with_reply(self.polled), plot=False)  # the same poll again
            self.overlay()
            self.update_roofline()

    def _with_reply(self, m: ServerMeasures) -> ServerMeasures:
        r = self.reply
        if r is None or m.engine != OLLAMA:
            return m
        return dataclasses.replace(m, prefill_tps=r.prefill_tps or None, decode_tps=r.decode_tps or None,
                                   decode_tps_from="last reply" if r.decode_tps else "",
                                   scope="last reply; model memory now")

    def update_roofline(self) -> bool:
        """While a remote model is loaded: the Roofline box shows the server's phases against the roofs entered
        for it (or why it cannot), and True; a local model's box is the dashboard's own (False)."""
        d = self.dash
        if d.loaded is None or d.loaded.chat_template_source != "server":
            return False
        remote = d.engine.remote
        entered = self.roofs_of(remote[0]) if remote else None
        m = d.remote_server.last
        # the model's size as the server gives it (llama-server's meta), else as entered for the server
        n_params = d.loaded.n_params or (entered.n_params if entered else 0)
        model_bytes = d.loaded.model_size or (entered.model_bytes if entered else 0)
        rr = remote_roofline(m, n_params, model_bytes, entered.bandwidth if entered else None,
                             entered.peak_flops if entered else None)
        d.roofline.update_remote(rr, m.source if m is not None else "server")
        return True

    def overlay(self) -> None:
        """While a reply streams, its live numbers own the cards; a local model's cards are its own."""
        d = self.dash
        if d._reply_started is None and d.loaded is not None and d.loaded.chat_template_source == "server":
            overlay_cards(d.remote_server.last, d.card_ttft, d.card_prefill, d.card_decode, d.card_kv)
