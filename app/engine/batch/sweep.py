"""The batching sweep's measurement: decode tok/s with 1, 2, 4, … sequences decoded together.

Runs the batch engine (its own process, as `roofline serve` does) with as many slots as the largest count,
and for each count submits that many greedy requests at once (distinct prompts, `ignore_eos`, the same
number of tokens), so they prefill in one step and then decode side by side. The rate is read from the
engine's own token times: over the window in which every stream is decoding (from the last first token to
the first last token), tokens of all streams ÷ the window's length. Counts are interleaved round by round,
so every count sees the same machine noise. No llama_cpp here: `roofline sweep batch` and the Lab page
call `measure_batch` with a progress callback and a cancel check.
"""

from __future__ import annotations

import itertools
import queue
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.engine import protocol as P
from app.engine.batch.client import BatchEngineClient
from app.engine.batch.messages import DropCaches

PROMPT_ROOM = 64  # tokens of a slot kept for the short prompt (and its template) besides the reply
STREAM_TIMEOUT_S = 600.0  # one count's requests all finish within this, or the sweep fails


class BatchSweepError(RuntimeError):
    """The engine failed a request, or a count did not finish in time."""


@dataclass(frozen=True)
class MeasuredPoint:
    streams: int
    aggregate_tps: float  # median over the rounds
    per_stream_tps: float
    rounds: tuple[float, ...]  # each round's aggregate tok/s


def token_times(metrics: dict[str, Any]) -> list[float]:
    """A finished request's token times on the engine's clock, from its Done metrics."""
    first = float(metrics.get("t_first") or 0.0)
    if not first:
        return []
    return [first, *(first + t / 1000.0 for t in itertools.accumulate(metrics.get("itl_ms", ())))]


def aggregate_rate(streams: list[list[float]]) -> float:
    """Tokens per second of all streams together while all of them were decoding.

    The window runs from the latest first token to the earliest last token; a token counts when it falls
    inside (after its window's start). With no such window (a stream of one token), all tokens after the
    first first token over the whole span."""
    streams = [s for s in streams if s]
    if not streams:
        return 0.0
    start, end = max(s[0] for s in streams), min(s[-1] for s in streams)
    if end > start:
        n = sum(1 for s in streams for t in s if start < t <= end)
        return n / (end - start)
    start, end = min(s[0] for s in streams), max(s[-1] for s in streams)
    n = sum(len(s) for s in streams) - 1
    return n / (end - start) if end > start else 0.0


def sweep_config(base: P.LoadConfig, counts: list[int], tokens: int) -> P.LoadConfig:
    """The engine's load config: a slot per stream of the largest count, each with room for one reply."""
    from dataclasses import replace

    slots = max(counts)
    return replace(base, n_ctx=slots * (tokens + PROMPT_ROOM), n_batch=max(512, base.n_batch),
                   n_ubatch=max(512, base.n_ubatch or 0), warmup=True)


def measure_batch(base: P.LoadConfig, counts: list[int], tokens: int = 64, rounds: int = 1,
                  progress: Callable[[int, int, str], None] | None = None,
                  cancelled: Callable[[], bool] | None = None,
                  client_factory: Callable[[int], BatchEngineClient] = BatchEngineClient,
                  measured: Callable[[list[MeasuredPoint]], None] | None = None) -> list[MeasuredPoint]:
    """Aggregate and per-stream decode tok/s at each count in `counts` (median of `rounds`).

    `progress(i, n, label)` is called before each measurement; when `cancelled()` turns true the sweep
    stops between two measurements (its requests are cancelled) and returns the counts finished in every
    round so far. `measured`, when given, gets the points measured so far after each measurement (a
    chart drawn as they come). Raises app.engine.client.EngineError if the model does not load, BatchSweepError if a
    request fails."""
    if not counts or min(counts) < 1 or tokens < 2 or rounds < 1:
        raise ValueError("counts must be positive, tokens at least 2 and rounds at least 1")
    events: queue.Queue[Any] = queue.Queue()
    client = client_factory(max(counts))
    results: dict[int, list[float]] = {n: [] for n in counts}
    ids = itertools.count()
    try:
        client.start_loaded(sweep_config(base, counts, tokens), events.put)
        total, done = rounds * len(counts), 0
        for r in range(rounds):
            for n in counts:
                if cancelled is not None and cancelled():
                    return _points(results, complete=r)
                if progress is not None:
                    progress(done + 1, total, f"{n} stream{'s' if n > 1 else ''}, round {r + 1} of {rounds}")
                rids = [f"sweep-{next(ids)}" for _ in range(n)]
                rate = _one_count(client, events, rids, tokens, cancelled)
                if rate is None:
                    return _points(results, complete=r)
                results[n].append(rate)
                done += 1
                if measured is not None:
                    measured(_points(results, complete=0))
        return _points(results, complete=rounds)
    finally:
        client.close()


def _one_count(client: BatchEngineClient, events: queue.Queue[Any], rids: list[str], tokens: int,
               cancelled: Callable[[], bool] | None) -> float | None:
    """One count's aggregate rate, or None when the sweep was cancelled meanwhile."""
    client.send(DropCaches())  # each count from empty cells: the last count's caches would widen attention
    for i, rid in enumerate(rids):
        client.send(P.Generate(request_id=rid, prompt=f"Story {i + 1}. Once upon a time",
                               sampling=P.Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=tokens,
                                                   ignore_eos=True, seed=i)))
    pending, stopped = set(rids), False
    times: list[list[float]] = []
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    while pending:
        if not stopped and cancelled is not None and cancelled():
            stopped = True
            for left in pending:
                client.send(P.Cancel(left))
        try:
            event = events.get(timeout=max(0.01, min(0.5, deadline - time.monotonic())))
        except queue.Empty:
            if time.monotonic() > deadline:
                raise BatchSweepError(f"{len(rids)} streams did not finish in {STREAM_TIMEOUT_S:.0f} s") from None
            continue
        event_id = getattr(event, "request_id", None)
        if event_id not in pending:
            continue
        if isinstance(event, P.Error):
            raise BatchSweepError(event.message)
        if isinstance(event, P.Done):
            pending.discard(event_id)
            times.append(token_times(event.metrics))
    return None if stopped else aggregate_rate(times)


def _points(results: dict[int, list[float]], complete: int) -> list[MeasuredPoint]:
    points = []
    for n, rates in results.items():
        rates = rates[:complete] if complete else rates
        if rates:
            agg = statistics.median(rates)
            points.append(MeasuredPoint(n, agg, agg / n, tuple(rates)))
    return points
