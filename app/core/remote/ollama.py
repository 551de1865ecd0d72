"""Ollama's own numbers: it has no /metrics, but each reply of its native API (/api/chat, /api/generate) ends
with prompt_eval_count / prompt_eval_duration (the prompt tokens it evaluated and the time, in nanoseconds),
eval_count / eval_duration (the reply's tokens and their time) and load_duration, and /api/ps lists the loaded
models with `size`, `size_vram` and `context_length`. Names from Ollama's `api/types.go` (Metrics,
ProcessModelResponse). Its OpenAI-compatible /v1 answers carry none of these: only `usage`.

Every value is a server's answer: a count is a whole number, a duration finite and under a week, or it is
left out with a note, as for llama-server's timings (app.engine.remote.server_timings).
"""

from __future__ import annotations

from typing import Any

from app.core.files.untrusted import finite_number, shown, whole_number
from app.core.remote.engines import LABELS, OLLAMA
from app.core.remote.measures import ServerMeasures, plausible_rate

MAX_NS = 7 * 24 * 3600 * 1e9
MAX_COUNT = 10**9
MAX_BYTES = 1 << 50


def _read(body: dict[str, Any], key: str, notes: list[str]) -> float | None:
    if body.get(key) is None:
        return None
    value = finite_number(body[key], MAX_NS) if key.endswith("duration") else whole_number(body[key], MAX_COUNT)
    if value is None or value < 0:
        notes.append(f"Ollama's {key} ({shown(body[key])}) is not a {'duration' if 'duration' in key else 'count'}"
                     ": ignored")
        return None
    return float(value)


def reply_measures(body: Any, t: float = 0.0) -> ServerMeasures | None:
    """The server-side prefill and decode of one native-API reply (its last, `done` object); None when it
    carries none of Ollama's numbers."""
    if not isinstance(body, dict):
        return None
    out = ServerMeasures(OLLAMA, LABELS[OLLAMA], t, None)
    got = {k: _read(body, k, out.notes) for k in ("prompt_eval_count", "prompt_eval_duration", "eval_count",
                                                  "eval_duration", "load_duration")}
    if all(v is None for v in got.values()) and not out.notes:
        return None
    if got["prompt_eval_count"] is not None and got["prompt_eval_duration"]:
        out.prefill_tps = plausible_rate(got["prompt_eval_count"], got["prompt_eval_duration"] / 1e9, "prefill rate",
                                         out.notes)
    if got["eval_count"] is not None and got["eval_duration"]:
        out.decode_tps = plausible_rate(got["eval_count"], got["eval_duration"] / 1e9, "decode rate", out.notes)
        out.decode_tps_from = "decode time" if out.decode_tps else ""
    if got["load_duration"] is not None:
        out.load_ms = got["load_duration"] / 1e6
    return out


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
    out = ServerMeasures(OLLAMA, LABELS[OLLAMA], t, None)
    size, vram = whole_number(row.get("size"), MAX_BYTES), whole_number(row.get("size_vram"), MAX_BYTES)
    ctx = whole_number(row.get("context_length"), MAX_COUNT)
    out.memory_bytes, out.memory_gpu_bytes = size, vram
    out.kv_capacity = ctx or None  # the context window the runner allocated, in tokens
    out.running = len(rows) if not model else None  # loaded models, not requests: only when none was asked for
    for key in ("size", "size_vram", "context_length"):
        if row.get(key) is not None and whole_number(row.get(key), MAX_BYTES) is None:
            out.notes.append(f"Ollama's /api/ps {key} ({shown(row.get(key))}) is not a count: ignored")
    return out
