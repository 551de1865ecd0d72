"""What the user's own chats say about one model: the decode speeds measured at each depth (the points drawn on
the predicted depth curve, `app.core.predict.depth`) and how far into the context its chats ever went (the
context-from-use advice, `app.core.predict.context_use`).

Only the local chat store's per-reply metrics count (PhaseMetrics.to_dict(), saved with each assistant reply
and the file that wrote it): replies of remote servers (client-side timing), replies with drafting (their
decode rate is not one token per step) and replies with no decode are left out of the speed points.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.chat.store import ChatStore

LOCAL_SOURCE = "llama.cpp perf counters"


@dataclass(frozen=True)
class MeasuredPoint:
    depth: float  # mean tokens in the cache while the reply decoded
    decode_tps: float


@dataclass
class ModelUsage:
    replies: int = 0  # replies of this model with metrics
    max_tokens: int = 0  # the most tokens one of its chats held in the context (prompt + reply)
    points: list[MeasuredPoint] = field(default_factory=list)


def _num(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def summarize(metrics: list[dict[str, Any]]) -> ModelUsage:
    """The usage of one model from its replies' metrics dicts (any order)."""
    usage = ModelUsage()
    for m in metrics:
        if not isinstance(m, dict):
            continue
        usage.replies += 1
        prompt, generated = _num(m, "prompt_tokens"), _num(m, "generated_tokens")
        usage.max_tokens = max(usage.max_tokens, int(prompt + generated), int(_num(m, "kv_cells_used")))
        decode_tokens, decode_ms = _num(m, "decode_tokens"), _num(m, "decode_ms")
        local = m.get("source", LOCAL_SOURCE) == LOCAL_SOURCE
        if local and decode_tokens >= 2 and decode_ms > 0 and not _num(m, "draft_tokens"):
            usage.points.append(MeasuredPoint(prompt + decode_tokens / 2, decode_tokens / (decode_ms / 1000.0)))
    usage.points.sort(key=lambda p: p.depth)
    return usage


def _same_file(a: str, b: str) -> bool:
    try:
        return a == b or Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError):
        return False


def model_usage(store: ChatStore, model_path: str) -> ModelUsage:
    """The usage of `model_path` in the chat store (chats in the trash count too: the user had them)."""
    rows = store.query("SELECT model, metrics FROM messages WHERE role = 'assistant' AND metrics IS NOT NULL"
                       " AND model IS NOT NULL")
    metrics = []
    for model, data in rows:
        if not isinstance(model, str) or not _same_file(model, model_path):
            continue
        try:
            parsed = json.loads(data)
        except (TypeError, ValueError):
            continue  # a damaged row: the message still shows, it just has no numbers
        metrics.append(parsed)
    return summarize(metrics)
