"""The server's own phase numbers for the remote backend: llama-server's `timings` block.

llama.cpp's llama-server and `roofline serve` end a reply (its last stream chunk, or the JSON body) with
`timings`: prompt_n / prompt_ms (the prompt tokens it evaluated and how long that took), cache_n (prompt
tokens it found in its KV cache), predicted_n / predicted_ms (the reply's tokens and their decode time).
Measured on the server's clock they are the real prefill and decode numbers, where the client's clock can
only see the time to the first token (network and queueing included). No llama_cpp, no HTTP: the remote
backend hands in the lines it reads and the metrics it built.

app/engine/remote/backend.py reads every stream line with `timings_in_line` and builds Done's metrics through
`apply_server_timings`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from app.core.metrics.phase import PhaseMetrics

SERVER_SOURCE = "server timings (prefill and decode on the server's clock)"
KEYS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def parse_timings(block: Any) -> dict[str, float] | None:
    """The usable numbers of a `timings` object (non-negative and finite), or None when it has no prompt
    count and time: a server's text is untrusted, a malformed block is ignored rather than shown."""
    if not isinstance(block, dict):
        return None
    out = {k: v for k in KEYS if (v := _number(block.get(k))) is not None}
    return out if "prompt_n" in out and "prompt_ms" in out else None


def timings_in_line(raw: bytes | str) -> dict[str, float] | None:
    """The `timings` of one server-sent-events line (`data: {...}`) or JSON body, or None."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    if text.startswith("data:"):
        text = text[5:].strip()
    if not text.startswith("{") or '"timings"' not in text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return parse_timings(data.get("timings")) if isinstance(data, dict) else None


def apply_server_timings(metrics: dict[str, Any], timings: dict[str, float] | None) -> dict[str, Any]:
    """`metrics` (PhaseMetrics.to_dict of the client's view) with prefill and decode from the server's
    timings, when there are any; the client's TTFT, inter-token gaps and totals stay as measured."""
    if not timings:
        return metrics
    out = dict(metrics)
    out["prefill_tokens"] = int(timings["prompt_n"])
    out["prefill_ms"] = timings["prompt_ms"]
    if "cache_n" in timings:
        out["reused_tokens"] = int(timings["cache_n"])
    if "predicted_n" in timings and "predicted_ms" in timings and timings["predicted_n"] > 1:
        # the server's predicted_ms runs from the first token to the last: n - 1 decode steps
        out["decode_tokens"] = int(timings["predicted_n"]) - 1
        out["decode_ms"] = timings["predicted_ms"]
    out["source"] = SERVER_SOURCE
    out["server_timings"] = dict(timings)
    out.update(PhaseMetrics.from_dict(out).to_dict())  # the derived rates (prefill_tps, decode_tps) follow
    return out
