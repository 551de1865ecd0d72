"""app.core.sampling.logprobs: the drawn tokens' log-probabilities, from the model's own row."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.sampling.chain import Sampler, SamplerParams
from app.core.sampling.constraint import CONTROL_PREFIX, GrammarSpec, TokenVocab
from app.core.sampling.logprobs import logprob_entry, token_logprob


def log_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max())
    return np.log(e / e.sum())


def test_token_logprob_is_the_log_softmax_and_its_top_is_sorted() -> None:
    rng = np.random.default_rng(0)
    row = rng.normal(0, 3, 262_144).astype(np.float32)
    ref = log_softmax(row)
    got = token_logprob(row, 17, 5)
    assert got.logprob == pytest.approx(ref[17], abs=1e-6)
    assert [t for t, _ in got.top] == np.argsort(-ref)[:5].tolist()
    assert [lp for _, lp in got.top] == pytest.approx(np.sort(ref)[::-1][:5].tolist(), abs=1e-6)
    assert token_logprob(row, 3, 0).top == []


def test_entries_keep_exact_bytes_of_partial_characters() -> None:
    pieces = {1: "é".encode()[:1], 2: b"ok"}
    entry = logprob_entry(token_logprob(np.array([0.0, 1.0, 2.0]), 1, 2), pieces.__getitem__)
    assert entry["bytes"] == [0xC3] and entry["token"] == "\ufffd"
    assert [t["token"] for t in entry["top_logprobs"]] == ["ok", "\ufffd"]


def test_the_sampler_reports_the_models_row_not_the_penalised_or_masked_one() -> None:
    pieces = [CONTROL_PREFIX + b"<eos>"] + [bytes([i]) for i in range(256)]
    vocab = TokenVocab(pieces, [0])
    constraint = GrammarSpec.regex("[0-9]+").constraint(vocab)
    row = np.zeros(len(pieces), dtype=np.float32)
    row[1 + ord("a")] = 9.0  # the model's favourite, which the grammar forbids
    row[1 + ord("7")] = 5.0
    sampler = Sampler(SamplerParams(temperature=0.0, repeat_penalty=2.0), len(pieces), 0, constraint=constraint,
                      logprobs=2)
    assert sampler.sample(row) == 1 + ord("7")
    drawn = sampler.logprobs[-1]
    ref = log_softmax(row)
    assert drawn.logprob == pytest.approx(ref[1 + ord("7")], abs=1e-6)
    assert [t for t, _ in drawn.top] == [1 + ord("a"), 1 + ord("7")]
    without = Sampler(SamplerParams(), len(pieces), 0)
    without.sample(row)
    assert without.logprobs == []  # not asked: nothing computed
