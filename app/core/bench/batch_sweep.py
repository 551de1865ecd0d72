"""The batching sweep's result: measured decode tok/s per stream count beside app.core.predict.batching's
prediction, the gain of each count over the one before, and the one-sentence finding.

Pure Python (no llama_cpp, no Qt): `roofline sweep batch` prints it, the Lab page can draw it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.core.predict.batching import BatchPoint, predict_batch, stops_paying
from app.core.predict.speed import Rates

MIN_GAIN = 1.1  # a count that adds less than 10 % aggregate tok/s over the count before "stops paying"
# The sweep's prompts ("Story N. Once upon a time", app.engine.batch.sweep) with BOS: 8-10 tokens in the
# vocabularies tried. The rate is measured while every stream decodes, about half way through the replies.
SWEEP_PROMPT_TOKENS = 10


def sweep_depth(tokens: int) -> int:
    """Each stream's mean depth (prompt plus reply so far) over a sweep's measuring window."""
    return SWEEP_PROMPT_TOKENS + tokens // 2


@dataclass(frozen=True)
class BatchSweepRow:
    streams: int
    aggregate_tps: float
    per_stream_tps: float
    gain: float | None  # aggregate over the previous count's
    predicted_aggregate_tps: float | None
    predicted_per_stream_tps: float | None
    measured_over_predicted: float | None
    predicted_bound: str | None  # "memory bandwidth" | "compute"
    intensity: float | None  # predicted FLOPs per byte of one step: grows with the batch


def machine_rates(threads: int | None = None) -> Rates:
    """This machine's speed-model rates for `threads` CPU threads (None: llama.cpp's default): a stored
    `roofline calibrate` result for that thread count when there is one."""
    from app.core.predict.machine_roofs import machine_figures

    return machine_figures(threads)[0]


def predicted_curve(model_path: str | Path, counts: list[int], rates: Rates | None = None,
                    threads: int | None = None, tokens: int = 64) -> tuple[list[BatchPoint], bool]:
    """app.core.predict.batching's prediction for a sweep of `tokens` per stream with `rates`, else this machine's
    for the sweep's `threads`: (points, calibrated?). The thread count matters: one thread has half the
    arithmetic of two; so does the depth: in the shared KV cache each token attends over every stream's."""
    from app.core.gguf.info import inspect_gguf

    rates = rates or machine_rates(threads)
    return (predict_batch(inspect_gguf(str(model_path)), rates, counts, depth=sweep_depth(tokens)),
            bool(rates.cpu.calibrated))


def build_rows(measured: list[tuple[int, float]], predicted: list[BatchPoint]) -> list[BatchSweepRow]:
    by_count = {p.streams: p for p in predicted}
    rows, previous = [], None
    for n, agg in measured:
        p = by_count.get(n)
        rows.append(BatchSweepRow(
            streams=n, aggregate_tps=agg, per_stream_tps=agg / n,
            gain=agg / previous if previous else None,
            predicted_aggregate_tps=p.aggregate_tps if p else None,
            predicted_per_stream_tps=p.per_stream_tps if p else None,
            measured_over_predicted=agg / p.aggregate_tps if p and p.aggregate_tps else None,
            predicted_bound=p.bound if p else None, intensity=p.intensity if p else None))
        previous = agg
    return rows


def finding(measured: list[tuple[int, float]]) -> str:
    if len(measured) < 2:
        return "measure at least two stream counts to see where batching stops paying"
    stops = stops_paying(measured, MIN_GAIN)
    if stops is None:
        return f"on this machine aggregate decode tok/s still grows at {measured[-1][0]} streams"
    return (f"on this machine batching stops paying at ~{stops} streams "
            f"(less than {round((MIN_GAIN - 1) * 100)} % more aggregate tok/s than the count before)")


def table_text(rows: list[BatchSweepRow]) -> str:
    def num(v: float | None, fmt: str = ".1f") -> str:
        return "" if v is None else format(v, fmt)

    lines = [("| streams | aggregate tok/s | per stream tok/s | gain | predicted aggregate | predicted per stream "
             "| measured / predicted | predicted bound |"),
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.streams} | {r.aggregate_tps:.1f} | {r.per_stream_tps:.1f} | "
                     f"{'' if r.gain is None else f'{r.gain:.2f}x'} | {num(r.predicted_aggregate_tps)} | "
                     f"{num(r.predicted_per_stream_tps)} | {num(r.measured_over_predicted, '.2f')} | "
                     f"{r.predicted_bound or ''} |")
    return "\n".join(lines) + "\n"


def to_json(rows: list[BatchSweepRow], sentence: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {**meta, "points": [asdict(r) for r in rows], "finding": sentence}
