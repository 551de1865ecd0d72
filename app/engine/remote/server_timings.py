"""The server's own phase numbers for the remote backend: llama-server's `timings` block.

llama.cpp's llama-server and `roofline serve` end a reply (its last stream chunk, or the JSON body) with
`timings`: prompt_n / prompt_ms (the prompt tokens it evaluated and how long that took), cache_n (prompt
tokens it found in its KV cache), predicted_n / predicted_ms (the reply's tokens and their decode time).
Measured on the server's clock they are the real prefill and decode numbers, where the client's clock can
only see the time to the first token (network and queueing included). No llama_cpp, no HTTP: the remote
backend hands in the lines it reads and the metrics it built.

app/engine/remote/backend.py takes the block from each stream chunk, reads the last one with `read_timings` (a
count is a whole number up to MAX_TOKENS, a time finite and under a week, a phase's rate under
MAX_TOKENS_PER_S; a note for each value left out) and builds Done's metrics through `reply_metrics`.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.files.untrusted import finite_number, shown, whole_number
from app.core.metrics.phase import PhaseMetrics, rate
from app.engine.remote.openai_stream import MAX_TOKENS, MAX_TOKENS_PER_S

SERVER_SOURCE = "server timings (prefill and decode on the server's clock)"
KEYS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n")
MAX_MS = 7 * 24 * 3600 * 1000.0  # one phase of one reply: a week is far past any real prompt or reply
PHASES = (("prompt_n", "prompt_ms"), ("predicted_n", "predicted_ms"))


def read_timings(block: Any) -> tuple[dict[str, float] | None, list[str]]:
    """The usable numbers of a `timings` object, or None when it has no usable prompt count and time, and a
    one-line note for each number sent that was left out: a server's text is untrusted, and a value that is
    not a plausible count or time (a string, -1, NaN, 1e300, a rate past MAX_TOKENS_PER_S) is never shown."""
    if not isinstance(block, dict):
        return None, []
    out: dict[str, float] = {}
    notes: list[str] = []
    for key in KEYS:
        if block.get(key) is None:
            continue
        value = finite_number(block[key], MAX_MS) if key.endswith("_ms") else whole_number(block[key], MAX_TOKENS)
        if value is None:
            notes.append(f"the server's timings.{key} ({shown(block[key])}) is not a "
                         f"{'time' if key.endswith('_ms') else 'token count'}: ignored")
        else:
            out[key] = float(value)
    for n_key, ms_key in PHASES:
        if n_key in out and ms_key in out and rate(int(out[n_key]), out[ms_key]) > MAX_TOKENS_PER_S:
            notes.append(f"the server's timings.{n_key} and {ms_key} ({out[n_key]:.0f} tokens in "
                         f"{out[ms_key]:.3g} ms) would mean over {MAX_TOKENS_PER_S:,.0f} tok/s: ignored")
            del out[n_key], out[ms_key]
    if "prompt_n" in out and "prompt_ms" in out:
        return out, notes
    return None, notes + (["the server's timings are incomplete: its prefill and decode are not shown"]
                          if notes else [])


def parse_timings(block: Any) -> dict[str, float] | None:
    """read_timings without its notes."""
    return read_timings(block)[0]


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
    except (ValueError, RecursionError):
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


def reply_metrics(client: dict[str, Any], block: Any, reasoning: dict[str, Any]) -> dict[str, Any]:
    """Done's metrics of a remote reply: the client's view (client_metrics), the server's timings `block` as
    sent where usable (read_timings; its notes added to `server_notes`), the reply's reasoning numbers
    (ReasoningStream.metrics), and the server's own count of reasoning tokens over our count of chunks."""
    timings, notes = read_timings(block)
    data = dict(apply_server_timings(client, timings))
    data["server_notes"] = [*data.get("server_notes", []), *notes]
    data.update(reasoning)
    details = data.get("usage", {}).get("completion_tokens_details")  # only the plausible counts (read_usage)
    if details and details.get("reasoning_tokens"):
        data["reasoning_tokens"] = details["reasoning_tokens"]
    return data
