"""Percentiles of a Prometheus histogram over a window: the difference of its cumulative bucket counters
between two scrapes (or since the server started), read the way PromQL's histogram_quantile reads them.

Within a bucket the observations are taken as spread evenly (linear interpolation between its lower and upper
bound; the first bucket starts at 0, since every histogram read here is of durations); a rank that falls in
the +Inf bucket is given the largest finite bound, as histogram_quantile does: the engine's bucket layout is
the resolution, and a p99 past the last bound says "at least" that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class Distribution:
    """A latency distribution over a window, in milliseconds."""

    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float | None  # from _sum / _count, when both moved
    count: int  # observations in the window

    def as_dict(self) -> dict[str, float | int | None]:
        return {"p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "p99_ms": self.p99_ms, "mean_ms": self.mean_ms,
                "count": self.count}


def window_buckets(now: dict[float, float], before: dict[float, float] | None) -> list[tuple[float, float]] | None:
    """The window's cumulative counts, sorted by upper bound; None when the counters went down (a restarted
    server: the caller reads `now` alone) or the buckets are not cumulative (a hostile or broken server)."""
    bounds = sorted(now)
    if not bounds or not math.isinf(bounds[-1]):
        return None
    out = []
    for le in bounds:
        delta = now[le] - (before.get(le, 0.0) if before else 0.0)
        if delta < 0:
            return None
        out.append((le, delta))
    if any(b[1] < a[1] for a, b in zip(out, out[1:], strict=False)):
        return None
    return out


def quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The q-quantile (0..1) of cumulative `buckets` (sorted, +Inf last); None when they hold nothing."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank and count > below:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / (count - below)
        if not math.isinf(le):
            lower = le
        below = count
    return lower


def distribution(now: dict[float, float] | None, before: dict[float, float] | None,
                 sum_now: float | None, sum_before: float | None) -> Distribution | None:
    """The window's distribution of a histogram in seconds, given in ms; None when nothing was observed in
    the window or its buckets are unusable."""
    if not now:
        return None
    buckets = window_buckets(now, before)
    if buckets is None and before is not None:  # counters reset: the server restarted within the window
        buckets, before, sum_before = window_buckets(now, None), None, None
    if buckets is None:
        return None
    count = buckets[-1][1]
    values = [quantile(buckets, q) for q in QUANTILES]
    if count <= 0 or any(v is None for v in values):
        return None
    mean = None
    if sum_now is not None:
        d_sum = sum_now - (sum_before or 0.0)
        if d_sum >= 0:
            mean = d_sum / count * 1000.0
    p50, p95, p99 = (float(v) * 1000.0 for v in values if v is not None)
    return Distribution(p50, p95, p99, mean, int(count))
