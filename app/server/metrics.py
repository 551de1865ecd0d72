"""The server's Prometheus metrics: llama-server's names, plus KV use and latency histograms.

llama-server's counters and gauges keep their names (llamacpp:prompt_tokens_total, ...) so existing
dashboards work; llamacpp:kv_cache_usage_ratio and llamacpp:kv_cache_tokens (which llama-server dropped)
come back, and time-to-first-token and inter-token latency are histograms. Pure Python, no dependency.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ITL_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str) -> list[str]:
        out, acc = [], 0
        for le, count in zip(self.buckets, self.counts, strict=False):
            acc += count
            out.append(f'{name}_bucket{{le="{le:g}"}} {acc}')
        out.append(f'{name}_bucket{{le="+Inf"}} {self.n}')
        out += [f"{name}_sum {self.total:.6f}", f"{name}_count {self.n}"]
        return out


def _number(value: float) -> str:
    """Exact for counts (`:g` would print 1234567 as 1.23457e+06), six decimals otherwise."""
    return str(int(value)) if float(value).is_integer() else f"{value:.6f}"


class ServerMetrics:
    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.prompt_seconds = 0.0
        self.predicted_tokens = 0
        self.predicted_seconds = 0.0
        self.requests_ok = 0
        self.requests_failed = 0
        self.requests_cancelled = 0
        self.engine_restarts = 0
        self.running = 0
        self.waiting = 0
        self.kv_tokens = 0
        self.n_ctx = 0
        self.decode_steps = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.grammar_requests = 0  # finished requests that had a grammar (response_format, a forced tool call)
        self.grammar_decode_seconds = 0.0  # their decode time...
        self.grammar_seconds = 0.0  # ... and the part of it their grammar took (masks and steps)

    def on_stats(self, running: int, waiting: int, kv_tokens: int, n_ctx: int, steps: int) -> None:
        self.running, self.waiting, self.kv_tokens, self.n_ctx, self.decode_steps = (
            running, waiting, kv_tokens, n_ctx, steps)

    def on_done(self, finish: str, metrics: dict[str, Any]) -> None:
        if finish == "cancelled":
            self.requests_cancelled += 1
        else:
            self.requests_ok += 1
        self.prompt_tokens += int(metrics.get("prompt_n", 0))
        self.prompt_seconds += float(metrics.get("prompt_ms", 0.0)) / 1000.0
        self.predicted_tokens += int(metrics.get("predicted_n", 0))
        self.predicted_seconds += float(metrics.get("predicted_ms", 0.0)) / 1000.0
        if metrics.get("ttft_ms"):
            self.ttft.observe(float(metrics["ttft_ms"]) / 1000.0)
        for ms in metrics.get("itl_ms", ()):
            self.itl.observe(float(ms) / 1000.0)
        if "grammar_per_token_ms" in metrics:
            self.grammar_requests += 1
            decode_tokens = max(0, int(metrics.get("predicted_n", 0)) - 1)
            self.grammar_decode_seconds += float(metrics.get("predicted_ms", 0.0)) / 1000.0
            self.grammar_seconds += float(metrics["grammar_per_token_ms"]) * decode_tokens / 1000.0

    def render(self) -> str:
        def per_second(tokens: float, seconds: float) -> float:
            return tokens / seconds if seconds > 0 else 0.0

        ratio = min(1.0, self.kv_tokens / self.n_ctx) if self.n_ctx else 0.0
        rows: list[tuple[str, str, str, float]] = [
            ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", self.prompt_tokens),
            ("prompt_seconds_total", "counter", "Prompt process time.", self.prompt_seconds),
            ("tokens_predicted_total", "counter", "Number of generation tokens processed.",
             self.predicted_tokens),
            ("tokens_predicted_seconds_total", "counter", "Predict process time.", self.predicted_seconds),
            ("n_decode_total", "counter", "Total number of llama_decode() calls.", self.decode_steps),
            ("requests_total", "counter", "Requests finished (cancelled ones excluded).", self.requests_ok),
            ("requests_cancelled_total", "counter", "Requests whose client went away.", self.requests_cancelled),
            ("requests_failed_total", "counter", "Requests that ended in an error.", self.requests_failed),
            ("engine_restarts_total", "counter", "Times the engine process died and was restarted.",
             self.engine_restarts),
            ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
             per_second(self.prompt_tokens, self.prompt_seconds)),
            ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s (per request).",
             per_second(self.predicted_tokens, self.predicted_seconds)),
            ("kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", ratio),
            ("kv_cache_tokens", "gauge", "KV-cache tokens held by all slots (cached prefixes included).",
             self.kv_tokens),
            ("requests_processing", "gauge", "Number of requests processing.", self.running),
            ("requests_deferred", "gauge", "Number of requests deferred.", self.waiting),
            # Roofline's own: what grammars (structured output) cost the requests that had one
            ("grammar_requests_total", "counter", "Requests finished under a grammar (response_format, tools).",
             self.grammar_requests),
            ("grammar_decode_cost_ratio", "gauge", "Share of those requests' decode time spent in their grammar "
             "(1 - decode rate with it / without it).",
             min(1.0, self.grammar_seconds / self.grammar_decode_seconds) if self.grammar_decode_seconds > 0 else 0.0),
        ]
        out: list[str] = []
        for name, kind, help_text, value in rows:
            full = f"llamacpp:{name}"
            out += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}", f"{full} {_number(value)}"]
        for name, help_text, hist in (
                ("time_to_first_token_seconds", "Time from request to first token.", self.ttft),
                ("inter_token_latency_seconds", "Time between two tokens of a reply.", self.itl)):
            full = f"llamacpp:{name}"
            out += [f"# HELP {full} {help_text}", f"# TYPE {full} histogram"] + hist.lines(full)
        return "\n".join(out) + "\n"
