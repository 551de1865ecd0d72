"""Ollama's own numbers: it has no /metrics, but each reply of its native API (/api/chat, /api/generate) ends
with prompt_eval_count / prompt_eval_duration (the prompt tokens it evaluated and the time, in nanoseconds),
eval_count / eval_duration (the reply's tokens and their time) and load_duration, and /api/ps lists the loaded
models with `size`, `size_vram` and `context_length`. Names from Ollama's `api/types.go` (Metrics,
ProcessModelResponse). Its OpenAI-compatible /v1 answers carry none of these: only `usage`, so the remote
backend streams a chat through /api/chat when the server is Ollama (app.engine.remote.ollama_native).

Its runners end the prompt's time at the first token and start the reply's there (`processingDuration`
then `startedAt` in runner/ollamarunner/runner.go; llama-server's prompt_ms and predicted_ms where it runs
one): eval_duration holds eval_count - 1 decode steps, as llama-server's per-reply `timings` do.

Every value is a server's answer: a count is a whole number up to MAX_REPLY_TOKENS, a duration finite and under
a week, or it is left out with a note, as for llama-server's timings (app.engine.remote.server_timings).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.core.files.untrusted import finite_number, shown, whole_number
from app.core.remote.engines import LABELS, OLLAMA
from app.core.remote.measures import ServerMeasures, plausible_rate

MAX_NS = 7 * 24 * 3600 * 1e9
MAX_COUNT = 10**9
MAX_REPLY_TOKENS = 1 << 24  # one reply's prompt or reply tokens: past the largest context windows (10M tokens)
MAX_BYTES = 1 << 50
REPLY_KEYS = ("prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration", "load_duration")
REPLY = "ollama_reply"  # the key of a reply's checked numbers in Done.metrics (the remote backend writes it)
# the `source` of such a reply's metrics: its prefill and decode are the server's
REPLY_SOURCE = "server: Ollama (prefill and decode on the server's clock, from its native API)"


def _read(body: dict[str, Any], key: str, notes: list[str]) -> float | None:
    if body.get(key) is None:
        return None
    duration = key.endswith("duration")
    value = finite_number(body[key], MAX_NS) if duration else whole_number(body[key], MAX_REPLY_TOKENS)
    if value is None:
        notes.append(f"Ollama's {key} ({shown(body[key])}) is not a {'duration' if duration else 'token count'}"
                     ": ignored")
        return None
    return float(value)


def reply_numbers(body: Any) -> tuple[dict[str, float], list[str]]:
    """The numbers of a native-API reply's last (`done`) object that are plausible counts and durations (in
    Ollama's names and units), and a one-line note for each one sent that is not."""
    notes: list[str] = []
    if not isinstance(body, dict):
        return {}, notes
    got = {k: _read(body, k, notes) for k in REPLY_KEYS}
    return {k: v for k, v in got.items() if v is not None}, notes


def reply_measures(body: Any, t: float = 0.0) -> ServerMeasures | None:
    """The server-side prefill and decode of one native-API reply (its last, `done` object); None when it
    carries none of Ollama's numbers."""
    if not isinstance(body, dict):
        return None
    out = ServerMeasures(OLLAMA, LABELS[OLLAMA], t, None, scope="this reply")
    got, out.notes = reply_numbers(body)
    if not got and not out.notes:
        return None
    if "prompt_eval_count" in got and got.get("prompt_eval_duration"):
        out.prefill_tps = plausible_rate(got["prompt_eval_count"], got["prompt_eval_duration"] / 1e9, "prefill rate",
                                         out.notes)
    if "eval_count" in got and got.get("eval_duration"):
        # eval_duration runs from the first reply token to the last: eval_count - 1 steps (the module's docstring)
        out.decode_tps = plausible_rate(got["eval_count"] - 1, got["eval_duration"] / 1e9, "decode rate", out.notes)
        out.decode_tps_from = "decode time" if out.decode_tps else ""
    if "load_duration" in got:
        out.load_ms = got["load_duration"] / 1e6
    return out


def with_reply(polled: ServerMeasures | None, metrics: dict[str, Any]) -> ServerMeasures | None:
    """`polled` (Ollama's /api/ps) with the per-reply prefill, decode and load of the reply whose Done metrics
    are `metrics`, where that reply went through Ollama's native API; `polled` as it is otherwise."""
    reply = reply_measures(metrics.get(REPLY))
    if reply is None or (polled is not None and polled.engine != OLLAMA):
        return polled
    if polled is None:
        return reply
    return dataclasses.replace(polled, prefill_tps=reply.prefill_tps, decode_tps=reply.decode_tps,
                               decode_tps_from=reply.decode_tps_from, load_ms=reply.load_ms,
                               scope="this reply; model memory now", notes=[*polled.notes, *reply.notes])


def ps_measures(body: Any, t: float = 0.0, model: str | None = None) -> ServerMeasures | None:
    """The loaded model's memory and context from /api/ps (`model` when named and listed, else the first)."""
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        return None
    rows = [m for m in models if isinstance(m, dict)]
    if model:
        rows = [m for m in rows if m.get("name") == model or m.get("model") == model] or rows
    if not rows:
        return None
    row = rows[0]
    out = ServerMeasures(OLLAMA, LABELS[OLLAMA], t, None, scope="now")
    size, vram = whole_number(row.get("size"), MAX_BYTES), whole_number(row.get("size_vram"), MAX_BYTES)
    ctx = whole_number(row.get("context_length"), MAX_COUNT)
    out.memory_bytes, out.memory_gpu_bytes = size, vram
    out.kv_capacity = ctx or None  # the context window the runner allocated, in tokens
    out.running = len(rows) if not model else None  # loaded models, not requests: only when none was asked for
    for key in ("size", "size_vram", "context_length"):
        if row.get(key) is not None and whole_number(row.get(key), MAX_BYTES) is None:
            out.notes.append(f"Ollama's /api/ps {key} ({shown(row.get(key))}) is not a count: ignored")
    return out
