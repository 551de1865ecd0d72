"""The chat turns a reply's prompt left out: when the chat no longer fits the model's context, the engine drops
its oldest turns (app.engine.llama.worker.generate.prompt_tokens, the system prompt and the newest message
kept) and counts them in the reply's metrics (`messages_dropped`, with the context they had to fit,
`context_limit`). The reply then answered without them, which the user must be told in so many words: the
window says it on the reply and on the dashboard, the CLI in its summary."""

from __future__ import annotations

from typing import Any


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def messages_left_out(metrics: dict[str, Any]) -> str:
    """"2 earlier messages left out to fit the 2,048-token context", or "" when none was."""
    dropped = _whole(metrics.get("messages_dropped"))
    if not dropped:
        return ""
    limit = _whole(metrics.get("context_limit"))
    context = f"the {limit:,}-token context" if limit else "the context"
    return f"{dropped} earlier message{'s' if dropped != 1 else ''} left out to fit {context}"
