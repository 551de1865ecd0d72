"""One engine's scrape against an earlier one, in Roofline's own measures (`ServerMeasures`).

Histograms become percentiles over the window between the two scrapes (app.core.remote.histogram), counters
become rates over it, gauges are read as they are. Without an earlier scrape the window is the server's whole
life (`window_s` None: "since the server started"). A counter that went down means the server restarted in
between: that counter's window is then its new total. Every number is the server's own clock; what the client
measures (TTFT through the network, its inter-token gaps) stays in PhaseMetrics, beside these, never mixed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.core.remote.engines import EngineSpec, Names, Pairs, label_for
from app.core.remote.exposition import Exposition
from app.core.remote.histogram import Distribution, distribution

MAX_TOKENS_PER_S = 1e8  # a rate past this is a broken or hostile counter, not a GPU


@dataclass
class ServerMeasures:
    engine: str  # the spec's key ("vllm")
    label: str  # for the cards: "vLLM", "roofline serve"
    t: float
    window_s: float | None  # None: since the server started
    ttft: Distribution | None = None
    itl: Distribution | None = None
    prefill_time: Distribution | None = None  # per request
    decode_time: Distribution | None = None
    queue_time: Distribution | None = None
    prefill_tps: float | None = None  # per request, on the server's clock
    decode_tps: float | None = None
    decode_tps_from: str = ""  # "decode time" or "ITL mean"
    prompt_tps_total: float | None = None  # aggregate over all requests in the window
    generation_tps_total: float | None = None
    kv_fraction: float | None = None
    kv_tokens: int | None = None
    kv_capacity: int | None = None
    prefix_hit_rate: float | None = None
    running: int | None = None
    waiting: int | None = None
    preemptions: int | None = None  # in the window
    spec_acceptance: float | None = None
    memory_bytes: int | None = None  # the model's memory on the server (Ollama's /api/ps)
    memory_gpu_bytes: int | None = None
    load_ms: float | None = None  # the model's load time in the last reply (Ollama)
    scope: str = ""  # what the numbers cover when not a window of scrapes (Ollama's: "this reply", "now")
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"server: {self.label}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["source"] = self.source
        return out


def _first(now: Exposition, names: Names) -> str | None:
    return next((n for n in names if n in now.values or n in now.buckets), None)


def _delta(now: Exposition, before: Exposition | None, name: str) -> float | None:
    value = now.get(name)
    if value is None:
        return None
    old = before.get(name) if before is not None else None
    if old is None or value < old:  # no earlier scrape, or a restart: the new total is the window's
        return value
    return value - old


def _hist(now: Exposition, before: Exposition | None, names: Names) -> Distribution | None:
    name = _first(now, names)
    if name is None or name not in now.buckets:
        return None
    return distribution(now.buckets[name], before.buckets.get(name) if before else None,
                        now.get(name + "_sum"), before.get(name + "_sum") if before else None)


def _ratio(now: Exposition, before: Exposition | None, pairs: Pairs) -> tuple[float, float] | None:
    """(numerator delta, denominator delta) of the first pair the scrape holds."""
    for top, bottom in pairs:
        a, b = _delta(now, before, top), _delta(now, before, bottom)
        if a is not None and b is not None:
            return a, b
    return None


def _gauge(now: Exposition, names: Names, mean: bool = False) -> float | None:
    name = _first(now, names)
    if name is None:
        return None
    return now.mean(name) if mean else now.get(name)


def _fraction(value: float | None, what: str, notes: list[str]) -> float | None:
    if value is None:
        return None
    if value > 1.0 + 1e-9:
        notes.append(f"the server's {what} ({value:.3g}) is not a fraction: ignored")
        return None
    return value


def plausible_rate(tokens: float, seconds: float, what: str, notes: list[str]) -> float | None:
    if seconds <= 0 or tokens <= 0:
        return None
    value = tokens / seconds
    if value > MAX_TOKENS_PER_S:
        notes.append(f"the server's {what} ({tokens:.0f} tokens in {seconds:.3g} s) is not plausible: ignored")
        return None
    return value


def measure(spec: EngineSpec, now: Exposition, before: Exposition | None = None) -> ServerMeasures:
    """The measures of scrape `now` over the window since `before` (None: since the server started)."""
    if before is not None and before.t >= now.t:
        before = None
    window = now.t - before.t if before is not None else None
    out = ServerMeasures(spec.key, label_for(spec.key, now.names()), now.t, window)
    notes = out.notes
    out.ttft = _hist(now, before, spec.ttft)
    out.itl = _hist(now, before, spec.itl)
    out.prefill_time = _hist(now, before, spec.prefill_time)
    out.decode_time = _hist(now, before, spec.decode_time)
    out.queue_time = _hist(now, before, spec.queue_time)

    prefill = _ratio(now, before, spec.prefill_rate)
    if prefill:
        out.prefill_tps = plausible_rate(prefill[0], prefill[1], "prefill rate", notes)
    decode = _ratio(now, before, spec.decode_rate)
    if decode:
        tokens = decode[0]
        finished = _first(now, spec.requests_finished)
        n = _delta(now, before, finished) if finished else None
        if n is not None and 0 < n < tokens:
            tokens -= n  # a reply's decode time runs from its first token to its last: n - 1 steps
        out.decode_tps = plausible_rate(tokens, decode[1], "decode rate", notes)
        out.decode_tps_from = "decode time" if out.decode_tps else ""
    if out.decode_tps is None and out.itl is not None and out.itl.mean_ms:
        out.decode_tps = 1000.0 / out.itl.mean_ms
        out.decode_tps_from = "ITL mean"

    if window:
        for attr, names in (("prompt_tps_total", spec.prompt_tokens), ("generation_tps_total", spec.generation_tokens)):
            name = _first(now, names)
            d = _delta(now, before, name) if name else None
            if d is not None:
                setattr(out, attr, plausible_rate(d, window, attr.replace("_", " "), notes) or 0.0)

    out.kv_fraction = _fraction(_gauge(now, spec.kv_fraction, mean=True), "KV-cache usage", notes)
    kv_tokens, kv_capacity = _gauge(now, spec.kv_tokens), _gauge(now, spec.kv_capacity)
    if spec.kv_blocks is not None:
        used, most, per_block = (now.get(n) for n in spec.kv_blocks)
        if per_block:
            per = per_block / max(1, now.series.get(spec.kv_blocks[2], 1))
            kv_tokens = used * per if used is not None else kv_tokens
            kv_capacity = most * per if most is not None else kv_capacity
    out.kv_tokens = int(kv_tokens) if kv_tokens is not None else None
    out.kv_capacity = int(kv_capacity) if kv_capacity else None
    if out.kv_fraction is None and out.kv_tokens is not None and out.kv_capacity:
        out.kv_fraction = _fraction(out.kv_tokens / out.kv_capacity, "KV-cache usage", notes)

    hits = _ratio(now, before, spec.prefix_hits)
    split = _ratio(now, before, spec.prefix_hits_misses)
    if split is not None:  # (hits, evaluated): the queried tokens are their sum
        hits = (split[0], split[0] + split[1])
    if hits and hits[1] > 0:
        out.prefix_hit_rate = _fraction(hits[0] / hits[1], "prefix-cache hit rate", notes)
    elif not hits:
        out.prefix_hit_rate = _fraction(_gauge(now, spec.prefix_hit_gauge, mean=True), "prefix-cache hit rate", notes)

    running, waiting = _gauge(now, spec.running), _gauge(now, spec.waiting)
    out.running = int(running) if running is not None else None
    out.waiting = int(waiting) if waiting is not None else None
    name = _first(now, spec.preemptions)
    preempted = _delta(now, before, name) if name else None
    out.preemptions = int(preempted) if preempted is not None else None

    spec_pair = _ratio(now, before, spec.spec_pairs)
    if spec_pair and spec_pair[1] > 0:
        out.spec_acceptance = _fraction(spec_pair[0] / spec_pair[1], "spec-decode acceptance", notes)
    elif not spec_pair:
        out.spec_acceptance = _fraction(_gauge(now, spec.spec_gauge, mean=True), "spec-decode acceptance", notes)
    if now.dropped:
        notes.append(f"{now.dropped} of the server's samples were not finite, non-negative numbers: ignored")
    return out
