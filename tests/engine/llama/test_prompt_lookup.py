"""Prompt-lookup decoding: the n-gram draft search, and greedy text on/off through the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from app.engine.client import EngineClient
from app.engine.llama.prompt_lookup import find_draft
from engine_helpers import running_engine

CODE = '''def total_price(items, tax_rate):
    subtotal = 0
    for item in items:
        subtotal += item.price * item.quantity
    tax = subtotal * tax_rate
    return subtotal + tax
'''


def test_draft_is_the_continuation_of_the_latest_longest_match() -> None:
    history = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 2, 3]
    # tail (2, 3) last occurred at index 6..7, followed by 7, 8, 5 ...
    assert find_draft(history, max_ngram=2, max_draft=3) == [7, 8, 5]
    # a 3-gram (5, 2, 3) has no earlier occurrence, so the 2-gram decides
    assert find_draft(history, max_ngram=3, max_draft=2) == [7, 8]


def test_no_match_means_no_draft_and_the_draft_is_capped() -> None:
    assert find_draft([1, 2, 3, 4], max_ngram=3, max_draft=5) == []
    assert find_draft([4], max_ngram=3, max_draft=5) == []
    assert find_draft([5, 6, 7, 8, 9, 5], max_ngram=1, max_draft=2) == [6, 7]
    # the continuation may run up to the end of the history, never past it
    assert find_draft([5, 6, 5], max_ngram=1, max_draft=8) == [6, 5]
    # a lone matching token is not enough evidence when min_ngram is 2
    assert find_draft([5, 6, 7, 5], max_ngram=3, max_draft=8, min_ngram=2) == []
    assert find_draft([5, 6, 7, 5, 6], max_ngram=3, max_draft=8, min_ngram=2) == [7, 5, 6]


@pytest.fixture(scope="module")
def engine(default_model: Path):
    yield from running_engine(default_model, n_threads=1)


def _run(client: EngineClient, prompt: str, lookup: bool, n: int) -> P.Done:
    # Reload: each run starts from an empty KV cache, so both see the same prefill numerics.
    assert client.loaded is not None
    client.load(P.LoadConfig(model_path=client.loaded.model_path, n_ctx=1024, n_threads=1))
    req = P.Generate(request_id=client.new_request_id("s"), prompt=prompt, prompt_lookup=lookup,
                     sampling=P.Sampling(temperature=0.0, max_tokens=n, seed=1, ignore_eos=True))
    events = list(client.generate(req, timeout=600))
    done = events[-1]
    assert isinstance(done, P.Done)
    assert done.text == "".join(e.text for e in events if isinstance(e, P.Token))
    return done


PROMPTS = {  # a copy-heavy answer, and free text where most drafts are rejected
    "code": (f"Rewrite this function with renamed variables:\n\n{CODE}\nRewritten:\n\n", 48),
    "prose": ("The three laws of thermodynamics are", 64),
}


@pytest.mark.model
@pytest.mark.parametrize("kind", ["code", "prose"])
def test_greedy_text_is_identical_with_and_without_lookup(engine: EngineClient, kind: str) -> None:
    prompt, n = PROMPTS[kind]
    off = _run(engine, prompt, False, n)
    on = _run(engine, prompt, True, n)
    assert on.text == off.text and len(on.text) > 40
    m_on, m_off = PhaseMetrics.from_dict(on.metrics), PhaseMetrics.from_dict(off.metrics)
    assert m_off.draft_tokens == 0 and m_on.draft_tokens > 0
    assert (m_off.drafter, m_on.drafter) == ("", "prompt lookup")
    assert 0 <= m_on.draft_accepted <= m_on.draft_tokens
    if kind == "code":  # the answer copies the prompt: drafts are right (how many batches run depends on
        assert m_on.draft_accepted > 0  # timing: lookup pauses itself while it is slower than plain steps)
    assert m_on.generated_tokens == m_off.generated_tokens == n
    # the cache ends as the plain path leaves it: prompt + every emitted token but the last
    assert m_on.kv_cells_used == m_off.kv_cells_used == m_on.prompt_tokens + n - 1
    # batches that verify drafts are decode work: counted there, never as prefill
    assert m_on.prefill_tokens == m_off.prefill_tokens == m_on.prompt_tokens
    assert m_on.decode_tokens == n - 1
    # speed-up vs plain decoding is measured (this run's single-token steps, or the previous plain run)
    assert on.metrics["lookup_speedup"] > 0
    assert on.metrics["lookup_batch_steps"] > 0 and "lookup_speedup" not in off.metrics
    assert on.text.strip()


@pytest.mark.model
def test_a_follow_up_after_lookup_reuses_the_cache_consistently(engine: EngineClient) -> None:
    prompt = f"Copy this code exactly:\n\n{CODE}\nCopy:\n\n"
    first = _run(engine, prompt, True, 24)
    # Same prompt again without reloading: the cached prefix is reused.
    req = P.Generate(request_id="again", prompt=prompt, prompt_lookup=True,
                     sampling=P.Sampling(temperature=0.0, max_tokens=24, seed=1, ignore_eos=True))
    again = list(engine.generate(req, timeout=600))[-1]
    m = PhaseMetrics.from_dict(again.metrics)
    # the whole prompt, and its first logits, came from the cache (app.engine.llama.decoding.prefill): nothing evaluated
    assert m.reused_tokens == m.prompt_tokens and m.prefill_tokens == 0
    assert m.kv_cells_used == m.prompt_tokens + m.generated_tokens - 1
    assert first.finish_reason == again.finish_reason == "length"


@pytest.mark.model
@pytest.mark.parametrize("prompt_words", [100, 110, 116])
def test_lookup_in_a_128_token_context_stays_inside_it(default_model: Path, prompt_words: int) -> None:
    # llama.cpp pads --ctx 128 to 256 cells but llama-cpp-python's token bookkeeping holds 128: drafts sized by
    # the padded context would be written past its end. A repetitive prompt near the limit makes lookup draft
    # right up to it; the reply must end at the context with every draft inside it.
    client = EngineClient()
    client.start()
    try:
        client.load(P.LoadConfig(model_path=str(default_model), n_ctx=128, n_threads=1))
        prompt = " ".join(["red green blue"] * (prompt_words // 3))
        req = P.Generate(request_id="c128", prompt=prompt, prompt_lookup=True, context_overflow="stop",
                         sampling=P.Sampling(temperature=0.0, max_tokens=300, seed=1, ignore_eos=True))
        done = list(client.generate(req, timeout=600))[-1]
    finally:
        client.close()
    assert isinstance(done, P.Done), done
    m = PhaseMetrics.from_dict(done.metrics)
    assert done.finish_reason == "context_full"
    assert m.draft_tokens > 0
    assert m.prompt_tokens + m.generated_tokens <= 128
