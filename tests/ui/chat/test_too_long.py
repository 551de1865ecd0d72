"""Reading the engine's refusal of a message over the context, and the context offered instead."""

from __future__ import annotations

import re
from pathlib import Path

from app.engine import protocol as P
from app.ui.chat.too_long import MAX_RAISED_CTX, TooLong, raised_context, read_refusal

ROOT = Path(__file__).resolve().parents[3]


def test_the_refusal_is_read_into_its_numbers() -> None:
    for text in ("ValueError: The message is 3285 tokens but the context holds 2048. Shorten it or load …",
                 "ValueError: The prompt is 3285 tokens but the context holds 2048. Shorten the prompt …"):
        assert read_refusal(P.Error("r", "bad_request", text)) == TooLong(3285, 2048)
    assert read_refusal(P.Error("r", "generation_failed", "The message is 1 tokens but the context holds 2")) is None
    assert read_refusal(P.Error("r", "bad_request", "ChatTemplateError: no")) is None


def test_the_engines_words_are_the_ones_read() -> None:
    """The window reads the engine's sentence: if the engine rewords it, this test says so first."""
    source = (ROOT / "app/engine/llama/worker/generate.py").read_text(encoding="utf-8")
    said = re.findall(r'f"The (message|prompt) is \{len\(tokens\)\} tokens but the context holds \{n_ctx\}', source)
    assert sorted(said) == ["message", "prompt"]


def test_the_raised_context_holds_the_message_and_a_reply() -> None:
    assert raised_context(TooLong(3285, 2048), 400, 32768) == 4096
    assert raised_context(TooLong(3285, 2048), 1000, 32768) == 8192  # 4285 tokens needed
    assert raised_context(TooLong(3285, 2048), 400, 3600) is None  # trained for less than the 3685 it needs
    assert raised_context(TooLong(3285, 2048), 400, 3800) == 3800  # the trained context holds it
    assert raised_context(TooLong(10**6, 2048), 400, 10**7) is None  # past what one button should do
    assert raised_context(TooLong(100_000, 2048), 400, 10**7) == MAX_RAISED_CTX
