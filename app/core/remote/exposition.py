"""A server's Prometheus text exposition, read with prometheus_client's parser and summed over label sets.

The text is a server's answer, so it is untrusted: at most MAX_METRICS_BYTES are read (the caller caps the
body; `read_exposition` refuses a longer text too), at most MAX_SAMPLES samples are kept, a value that is NaN,
infinite or negative is left out (counters, gauges and bucket counts of these engines are never negative),
and a text the parser rejects is refused in one line (`ExpositionError`), never a traceback.

Several label sets of one name (vLLM's `engine` and `model_name`, TensorRT-LLM's `model_name`) are summed:
counters, bucket counts and request gauges add up over data-parallel engines. A fraction gauge (KV usage) is
averaged instead (`Exposition.mean`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

MAX_METRICS_BYTES = 4 << 20  # vLLM with many models and LoRA adapters writes ~1 MiB; 4 MiB is past any real one
MAX_SAMPLES = 100_000
MAX_VALUE = 1e18  # a counter of tokens or seconds past this is not a real server's


class ExpositionError(ValueError):
    """The text is not a Prometheus exposition we read (one line saying why)."""


@dataclass
class Exposition:
    """One scrape: each sample name's sum over its label sets, how many label sets it had, and each
    histogram's cumulative bucket counts (upper bound -> count, summed over label sets)."""

    t: float = 0.0  # monotonic time of the scrape
    values: dict[str, float] = field(default_factory=dict)
    series: dict[str, int] = field(default_factory=dict)
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    dropped: int = 0  # samples left out (NaN, infinite, negative, absurd)

    def get(self, name: str) -> float | None:
        return self.values.get(name)

    def mean(self, name: str) -> float | None:
        """The average over label sets: a fraction gauge of two engines is not 1.6."""
        value = self.values.get(name)
        return None if value is None else value / max(1, self.series.get(name, 1))

    def names(self) -> set[str]:
        return set(self.values) | set(self.buckets)


def _bound(le: str) -> float | None:
    try:
        value = float(le)
    except ValueError:
        return None
    return value if not math.isnan(value) else None


def read_exposition(text: str, t: float = 0.0) -> Exposition:
    """The scrape in `text` (taken at monotonic time `t`). Raises ExpositionError for a text over the size
    limit, with too many samples, or that the parser rejects."""
    if len(text) > MAX_METRICS_BYTES:
        raise ExpositionError(f"the metrics text is larger than {MAX_METRICS_BYTES:,} bytes: not read")
    out = Exposition(t=t)
    n = 0
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                n += 1
                if n > MAX_SAMPLES:
                    raise ExpositionError(f"the metrics text holds over {MAX_SAMPLES:,} samples: not read")
                value = sample.value
                if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= MAX_VALUE:
                    out.dropped += 1
                    continue
                if sample.name.endswith("_bucket") and "le" in sample.labels:
                    le = _bound(sample.labels["le"])
                    if le is None:
                        out.dropped += 1
                        continue
                    base = sample.name[: -len("_bucket")]
                    counts = out.buckets.setdefault(base, {})
                    counts[le] = counts.get(le, 0.0) + float(value)
                    continue
                out.values[sample.name] = out.values.get(sample.name, 0.0) + float(value)
                out.series[sample.name] = out.series.get(sample.name, 0) + 1
    except ExpositionError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # what the parser raises on a malformed line
        raise ExpositionError(f"the metrics text is not Prometheus' text format ({_short(exc)})") from None
    return out


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text[:80] + ("…" if len(text) > 80 else "")
