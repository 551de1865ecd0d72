"""The dashboard's server box: what a running `roofline serve` is doing, from its /metrics
(app.core.metrics.serve_traffic).

Four cards — requests in flight (running + waiting for a slot), aggregate decode tok/s of all requests (with
what grammars cost the requests that had one: "grammar: -4.2 % decode"), the
time to first token of the requests that finished lately, KV cells held by all sequences — and the aggregate
rate over the last minutes, so the effect of batching is seen as requests come and go. Hidden while the
window serves nothing.
"""

from __future__ import annotations

import collections

import pyqtgraph as pg
from PySide6.QtWidgets import QGroupBox, QVBoxLayout, QWidget

from app.core.metrics.serve_traffic import Traffic
from app.ui.dashboard.cards import Card, CardGrid, fmt
from app.ui.dashboard.plots import make_plot, nice_ceiling, restyle_plot
from app.ui.toolkit import theme

HISTORY_POINTS = 300  # polls kept for the plot (five minutes at one a second)
SPAN_AT_LEAST_S = 60.0  # the time axis with no traffic (or a minute of it): 60 s ago to now, not "-0.4 … 0.4"


def grammar_note(t: Traffic) -> str:
    """" · grammar: -4.2 % decode" once requests ran under a grammar (structured output): what it cost them."""
    if not t.grammar_requests:
        return ""
    return f" · grammar: -{100 * t.grammar_cost:.1f} % decode ({t.grammar_requests} req)"


def rate_texts(t: Traffic) -> tuple[str, str]:
    """The Aggregate decode card's value and line. Tokens are counted as each request ends (llama-server's
    counters too), so while requests run and none has ended the card says the server is decoding, at how many
    steps a second, instead of a flat 0 tok/s beside a KV cache that grows."""
    served = f"{t.tokens_total:,} tokens served" + grammar_note(t)
    if t.decode_tps > 0:
        return fmt(t.decode_tps, 1, " tok/s"), served
    if t.in_flight and t.decode_steps_per_s > 0:
        return (fmt(t.decode_steps_per_s, 1, " steps/s"),
                f"decoding; its tokens are counted when a request ends · {served}")
    return "0 tok/s", served


class ServerTrafficPanel(QGroupBox):
    def __init__(self, parent: QWidget | None = None):
        super().__init__("Server traffic", parent)
        self.url = ""
        self.card_flight = Card("Requests in flight", None, "Requests holding a slot, and those waiting for one")
        self.card_rate = Card("Aggregate decode", theme.DECODE,
                              "Reply tokens of all requests per second: batching shows here")
        self.card_ttft = Card("TTFT", None, "Mean time to first token of the requests that finished lately "
                              "(queueing and prefill included, on the server's clock)")
        self.card_kv = Card("KV cells", None, "Cells held by all sequences (finished slots' cached prefixes "
                            "included) and their share of the server's context")
        self.cards = [self.card_flight, self.card_rate, self.card_ttft, self.card_kv]
        lay = QVBoxLayout(self)
        lay.addWidget(CardGrid(self.cards, max_columns=2))  # one column when two would cut the numbers
        self.plot = make_plot("Aggregate decode tok/s (server)", "tok/s", "s ago")
        self.curve = self.plot.plot([], [], pen=pg.mkPen(theme.DECODE, width=2))
        lay.addWidget(self.plot)
        self._history: collections.deque[tuple[float, float]] = collections.deque(maxlen=HISTORY_POINTS)
        self._y_max = 0.0
        self._x_span = 0.0
        self._show_span(0.0)
        self.setVisible(False)

    def _show_span(self, seconds: float) -> None:
        """The time axis from `seconds` ago (at least a minute, in nice steps) to now; an empty plot's was
        pyqtgraph's default around zero."""
        span = max(SPAN_AT_LEAST_S, nice_ceiling(seconds) if seconds > 0 else 0.0)
        if span != self._x_span:  # a range change redraws the axes: only when the span grows a step
            self._x_span = span
            self.plot.setXRange(-span, 0, padding=0)

    def set_url(self, url: str) -> None:
        """Show the panel while `url` is served; hide and clear it when `url` is empty."""
        self.url = url
        self.setTitle(f"Server traffic · {url}" if url else "Server traffic")
        if not url:
            self._history.clear()
            self._y_max = 0.0
            self.curve.setData([], [])
            self._show_span(0.0)
            for card in self.cards:
                card.set("—", "")
        self.setVisible(bool(url))

    def on_traffic(self, t: Traffic) -> None:
        self.card_flight.set(str(t.in_flight), f"{t.processing} running · {t.deferred} waiting")
        self.card_rate.set(*rate_texts(t))
        if t.ttft_ms is not None:
            self.card_ttft.set(fmt(t.ttft_ms, 0, " ms"), f"{t.finished} finished lately")
        self.card_kv.set(f"{t.kv_tokens:,}", f"{100 * t.kv_ratio:.0f} % of the context")
        self._history.append((t.t, t.decode_tps))
        xs = [p[0] - t.t for p in self._history]
        ys = [p[1] for p in self._history]
        self.curve.setData(xs, ys)
        self._show_span(-xs[0])
        top = nice_ceiling(max(max(ys), 1.0))
        if top != self._y_max:  # a range change redraws the axes: only when the ceiling moves
            self._y_max = top
            self.plot.setYRange(0, top, padding=0)

    def restyle(self) -> None:
        c = theme.colors()
        for card in self.cards:
            card.restyle()
        restyle_plot(self.plot, c.base, c.muted, c.text)
