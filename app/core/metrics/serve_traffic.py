"""A running `roofline serve`'s traffic, read from its Prometheus `/metrics` text (llama-server's names).

Two polls make a snapshot: requests in flight and KV cells are gauges, read as they are; the aggregate decode
rate and the time to first token of the requests that finished in between are the counters' and the TTFT
histogram's differences over the interval. Pure Python (the window polls, the dashboard draws), and the text
is a server's answer, so a text that does not parse gives an empty snapshot, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.remote.exposition import ExpositionError, read_exposition

PREFIX = "llamacpp:"


def parse_metrics(text: str) -> dict[str, float]:
    """`name -> value` for every sample, summed over label sets (histogram buckets left out), read by the
    remote normalizer's parser (app.core.remote.exposition, prometheus_client's): one home for the text
    format. A text the parser refuses gives no samples, never an exception."""
    try:
        return dict(read_exposition(text).values)
    except ExpositionError:
        return {}


@dataclass(frozen=True)
class Traffic:
    """What the server is doing now, and over the last poll interval."""

    t: float  # monotonic time of the poll
    processing: int  # requests holding a slot
    deferred: int  # requests waiting for one
    kv_tokens: int  # KV cells held by all sequences (finished slots' cached prefixes included)
    kv_ratio: float  # of the whole context
    decode_tps: float  # aggregate: reply tokens of all requests per second over the interval
    ttft_ms: float | None  # mean TTFT of the requests that finished in the interval (None: none finished)
    finished: int  # requests finished in the interval
    tokens_total: int  # reply tokens since the server started
    grammar_requests: int = 0  # requests finished under a grammar since the server started
    grammar_cost: float = 0.0  # the share of their decode time their grammar took (0.04: decode 4 % slower)
    # llama_decode() calls per second over the interval: live while requests run, where the token counters
    # (llama-server's too) move only as each request ends — a long non-streamed reply showed "0 tok/s" for 40 s
    decode_steps_per_s: float = 0.0

    @property
    def in_flight(self) -> int:
        return self.processing + self.deferred


def _get(m: dict[str, float], name: str) -> float:
    return m.get(PREFIX + name, 0.0)


def traffic(now: dict[str, float], t: float, before: dict[str, float] | None = None,
            t_before: float | None = None) -> Traffic:
    """The snapshot of `now` (parsed /metrics at time `t`), with rates against the poll `before`."""
    tokens = _get(now, "tokens_predicted_total")
    count, total = _get(now, "time_to_first_token_seconds_count"), _get(now, "time_to_first_token_seconds_sum")
    rate, ttft, finished, steps_rate = 0.0, None, 0, 0.0
    if before is not None and t_before is not None and t > t_before:
        d_steps = _get(now, "n_decode_total") - _get(before, "n_decode_total")
        steps_rate = max(0.0, d_steps) / (t - t_before)  # a restarted server's first interval reads as none
        # a counter that went down is a restarted server: its new totals are the interval's
        d_tokens = tokens - _get(before, "tokens_predicted_total")
        rate = max(0.0, d_tokens if d_tokens >= 0 else tokens) / (t - t_before)
        d_count = count - _get(before, "time_to_first_token_seconds_count")
        d_sum = total - _get(before, "time_to_first_token_seconds_sum")
        if d_count < 0:
            d_count, d_sum = count, total
        if d_count > 0:
            finished = int(d_count)
            ttft = max(0.0, d_sum) / d_count * 1000.0
    return Traffic(t=t, processing=int(_get(now, "requests_processing")),
                   deferred=int(_get(now, "requests_deferred")), kv_tokens=int(_get(now, "kv_cache_tokens")),
                   kv_ratio=min(1.0, max(0.0, _get(now, "kv_cache_usage_ratio"))), decode_tps=rate,
                   ttft_ms=ttft, finished=finished, tokens_total=int(tokens),
                   grammar_requests=int(_get(now, "grammar_requests_total")),
                   grammar_cost=min(1.0, max(0.0, _get(now, "grammar_decode_cost_ratio"))),
                   decode_steps_per_s=steps_rate)
