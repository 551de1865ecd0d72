"""The dashboard's line for reasoning models: time to the first answer token beside TTFT, and the thinking tokens.

TTFT counts the first token of any kind; a reasoning model's first token is thinking, so what the user waits
for before the answer starts is `ttft_answer_ms` (Done.metrics, from app.engine.reasoning_stream).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.engine import protocol as P


def reasoning_line(metrics: dict[str, Any]) -> str:
    """"first answer 812 ms · 120 thinking tok", or "" for a reply without thinking."""
    tokens = metrics.get("reasoning_tokens")
    if not isinstance(tokens, int) or tokens <= 0:
        return ""
    ttfa = metrics.get("ttft_answer_ms")
    answer = f"first answer {ttfa:.0f} ms" if isinstance(ttfa, (int, float)) else "no answer yet"
    return f"{answer} · {tokens} thinking tok"


def attach_reasoning_line(engine: Any, card: Any) -> None:
    """After each reply, add the reasoning line to the TTFT card's detail (the card was just set from the
    reply's PhaseMetrics, which know nothing of thinking)."""
    attach_detail_line(engine, card, reasoning_line)


def attach_detail_line(engine: Any, card: Any, line_for: Callable[[dict[str, Any]], str]) -> None:
    """After each reply, append `line_for(done.metrics)` (when not empty) to `card`'s detail line."""

    def on_done(done: P.Done) -> None:
        line = line_for(done.metrics)
        if line:
            detail = card.detail.text()
            card.set(card.value.text(), f"{detail} · {line}" if detail else line)

    engine.done.connect(on_done)
