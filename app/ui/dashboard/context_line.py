"""The dashboard's line for a full context: when it happened and how many tokens were dropped.

The engine's Done.metrics say which of the chat's oldest turns the prompt left out to fit the context
(app.core.chat.left_out) and what the overflow policy did (app.engine.llama.context_overflow): tokens cut from the
middle of the prompt before prefill, context shifts during the reply (`rolling`: at which reply token, how
many tokens left the KV cache), or a reply stopped because the context was full (`stop`). PhaseMetrics
knows nothing of that, so the line is added to the prompt card after the reply's numbers are shown.
"""

from __future__ import annotations

from typing import Any

from app.core.chat.left_out import messages_left_out


def _count(metrics: dict[str, Any], key: str) -> int:
    value = metrics.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def context_line(metrics: dict[str, Any], finish_reason: str = "") -> str:
    """"context full at tok 124: rolled ×1, 61 tok dropped", "2 earlier messages left out to fit the 2,048-token
    context", or "" when the context never filled."""
    left_out = messages_left_out(metrics)
    parts = [left_out] if left_out else []
    cut = _count(metrics, "context_prompt_dropped")
    if cut:
        parts.append(f"prompt cut: {cut} tok dropped")
    shifts = _count(metrics, "context_shifts")
    if shifts:
        at = [t for t in metrics.get("context_shift_at") or [] if isinstance(t, int)]
        where = f" at tok {', '.join(map(str, at[:3]))}{', …' if len(at) > 3 else ''}" if at else ""
        parts.append(f"context full{where}: rolled ×{shifts}, {_count(metrics, 'context_dropped')} tok dropped")
    if finish_reason == "context_full":
        parts.append(f"context full at tok {_count(metrics, 'generated_tokens')}: reply stopped")
    return " · ".join(parts)
