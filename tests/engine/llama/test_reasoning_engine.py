"""The local engine keeps thinking apart on the real default model: a chat template whose generation prompt
opens `<think>` (as DeepSeek-R1's does) makes the whole reply thinking; the normal template leaves it answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import protocol as P
from app.engine.client import EngineClient
from engine_helpers import collect

pytestmark = pytest.mark.model

# Gemma turns, then an opened thinking block: the model's reply starts inside it (and this small model
# never closes it, so all of it is thinking).
OPENS_THINKING = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' "
                  "else 'user' }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n<think>\n")


def _reply(client: EngineClient, split: bool = True) -> P.Done:
    req = P.Generate(request_id=client.new_request_id(), messages=[{"role": "user", "content": "Say hello."}],
                     sampling=P.Sampling(temperature=0.0, max_tokens=12, seed=1, ignore_eos=True),
                     split_reasoning=split)
    tokens, done = collect(client, req)
    assert "".join(t.text for t in tokens) == done.text
    assert "".join(t.reasoning for t in tokens).rstrip() == done.reasoning
    return done


def test_a_template_that_opens_thinking_sends_the_reply_to_reasoning(default_model: Path) -> None:
    with EngineClient() as client:
        client.load(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2,
                                 chat_template=OPENS_THINKING))
        done = _reply(client)
        assert done.text == "" and done.reasoning.strip()
        assert done.metrics["reasoning_tokens"] == done.metrics["generated_tokens"] == 12
        assert done.metrics["ttft_answer_ms"] is None
        assert done.metrics["reasoning_ms"] > 0
        unsplit = _reply(client, split=False)  # same greedy reply, all of it answer when not split
        assert unsplit.reasoning == "" and unsplit.text.strip() == done.reasoning.strip()
        client.load(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2))  # Gemma's own turns
        plain = _reply(client)
        assert plain.text.strip() and plain.reasoning == ""
        assert plain.metrics["reasoning_tokens"] == 0
        assert plain.metrics["ttft_answer_ms"] >= plain.metrics["ttft_ms"] > 0
