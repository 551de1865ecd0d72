"""The dashboard's line for reasoning models: time to the first answer token beside TTFT, and the thinking tokens.

TTFT counts the first token of any kind; a reasoning model's first token is thinking, so what the user waits
for before the answer starts is `ttft_answer_ms` (Done.metrics, from app.engine.reasoning_stream).
"""

from __future__ import annotations

from typing import Any


def reasoning_line(metrics: dict[str, Any]) -> str:
    """"first answer 812 ms · 120 thinking tok", or "" for a reply without thinking."""
    tokens = metrics.get("reasoning_tokens")
    if not isinstance(tokens, int) or tokens <= 0:
        return ""
    ttfa = metrics.get("ttft_answer_ms")
    answer = f"first answer {ttfa:.0f} ms" if isinstance(ttfa, (int, float)) else "no answer yet"
    return f"{answer} · {tokens} thinking tok"
