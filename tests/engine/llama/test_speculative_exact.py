"""Speculative decoding's greedy output equals plain decoding's, even where a verification batch's rounding
would flip a near-tie: the bookkeeping of which KV cells a batch wrote, on a model whose arithmetic we control.

The fake model gives every step one clear winner, except at chosen steps where the runner-up is 0.01 behind;
any cell written by a batch (or written on top of one) adds 0.02 to the runner-up there, as llama.cpp's batch
kernels round differently from its one-token kernels. The real-model counterpart is
tests/engine/llama/test_draft_model.py.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from app.core.sampling.chain import Sampler, SamplerParams
from app.engine.llama import decoding
from app.engine.llama import prompt_lookup as speculative
from app.engine.llama.prompt_lookup import PromptLookup

V = 16
PROMPT = [3, 1, 4, 1]


def clean_next(seq: list[int]) -> int:
    return (sum(seq) * 7 + len(seq)) % V


def logits_after(seq: list[int], inexact: bool, tie_lengths: set[int]) -> np.ndarray:
    x = np.zeros(V, dtype=np.float32)
    best = clean_next(seq)
    x[best] = 5.0
    if len(seq) in tie_lengths:
        runner_up = (best + 1) % V
        x[runner_up] = 4.99 + (0.02 if inexact else 0.0)
    return x


class FakeLlama:
    """The parts of `llama_cpp.Llama` prompt lookup touches, with cells that remember how they were written."""

    n_batch = 64

    def __init__(self, tie_lengths: set[int], n_ctx: int = 256) -> None:
        self.tie_lengths = tie_lengths
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0
        self.cells: list[tuple[int, bool]] = []  # (token, written by a batch or on top of such a cell)
        self.rows: list[np.ndarray] = []
        self._pending: list[int] = []
        self._batch = SimpleNamespace(set_batch=self._set_batch)
        self._ctx = SimpleNamespace(decode=self._decode, kv_cache_seq_rm=self._seq_rm)

    def n_ctx(self) -> int:
        return int(self.input_ids.shape[0])

    def n_vocab(self) -> int:
        return V

    def reset(self) -> None:
        self.n_tokens = 0
        self.cells = []

    def _seq_rm(self, seq: int, p0: int, p1: int) -> bool:
        del self.cells[p0:]
        return True

    def _write(self, tokens: list[int], batched: bool) -> None:
        self.rows = []
        for t in tokens:
            inexact = batched or any(d for _, d in self.cells)
            self.cells.append((t, inexact))
            self.rows.append(logits_after([c for c, _ in self.cells], inexact, self.tie_lengths))

    def eval(self, tokens: list[int]) -> None:  # the plain path's computation
        assert len(self.cells) == self.n_tokens
        self._write(list(tokens), batched=False)
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)

    def _set_batch(self, batch: list[int], n_past: int, logits_all: bool) -> None:
        assert n_past == len(self.cells) and logits_all
        self._pending = list(batch)

    def _decode(self, batch: Any) -> None:
        self._write(self._pending, batched=True)


class FixedDrafter(PromptLookup):
    """Drafts the true continuation for the first `batches` steps, then nothing (plain steps)."""

    def __init__(self, llm: Any, batches: int) -> None:
        sampler = Sampler(SamplerParams(temperature=0.0, repeat_penalty=1.0), n_vocab=V, seed=0)
        super().__init__(llm, sampler, plain_ms_hint=1000.0)  # a plain rate known: draft from the first step
        self.batches = batches

    def draft(self, history: list[int], k: int) -> list[int]:
        if self.batch_steps >= self.batches:
            return []
        seq, out = list(history), []
        for _ in range(k):
            out.append(clean_next(seq))
            seq.append(out[-1])
        return out


def plain_greedy(n: int) -> list[int]:
    seq = list(PROMPT)
    for _ in range(n):
        seq.append(clean_next(seq))
    return seq[len(PROMPT):]


def run(drafter: FixedDrafter, n: int) -> list[int]:
    gen = drafter.generate(list(PROMPT))
    out = [next(gen) for _ in range(n)]
    gen.close()
    return out


@pytest.fixture(autouse=True)
def fake_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = lambda llm, idx=-1: llm.rows[idx].copy()  # noqa: E731
    monkeypatch.setattr(speculative, "logits_row", rows)
    monkeypatch.setattr(decoding, "logits_row", rows)  # the prefill's first row (decoding.prefill)


def test_the_fake_flips_a_near_tie_on_batch_written_cells() -> None:
    # the premise of the tests below: without the rebuild, the tie would go the other way
    assert int(logits_after([1, 2], True, {2}).argmax()) != clean_next([1, 2])
    assert int(logits_after([1, 2], False, {2}).argmax()) == clean_next([1, 2])


def test_a_near_tie_inside_a_batch_is_decided_on_cells_one_token_steps_wrote() -> None:
    llm = FakeLlama(tie_lengths={len(PROMPT) + 11})
    drafter = FixedDrafter(llm, batches=100)
    assert run(drafter, 30) == plain_greedy(30)
    assert drafter.accepted > 10 and drafter.tie_steps == 1 and drafter.rebuilt > 1


def test_a_near_tie_in_a_plain_step_after_batches_is_decided_the_same_way() -> None:
    llm = FakeLlama(tie_lengths={len(PROMPT) + 25})
    drafter = FixedDrafter(llm, batches=2)  # two batches leave batch-written cells, then plain steps
    assert run(drafter, 30) == plain_greedy(30)
    assert drafter.batch_steps == 2 and drafter.tie_steps == 1 and drafter.plain_steps > 10


def test_without_batches_nothing_is_rebuilt() -> None:
    llm = FakeLlama(tie_lengths={len(PROMPT) + 5})
    drafter = FixedDrafter(llm, batches=0)
    assert run(drafter, 12) == plain_greedy(12)
    assert drafter.tie_steps == 0 and drafter.rebuilt == 0


def test_the_cache_ends_as_the_plain_path_leaves_it() -> None:
    llm = FakeLlama(tie_lengths={len(PROMPT) + 11})
    out = run(FixedDrafter(llm, batches=100), 20)
    assert llm.n_tokens == len(PROMPT) + len(out) - 1
    assert [c for c, _ in llm.cells] == PROMPT + out[:-1]


def test_rebuilding_is_counted_as_a_cost_of_drafting_not_of_plain_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(speculative, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    class TimedLlama(FakeLlama):
        def _write(self, tokens: list[int], batched: bool) -> None:
            clock[0] += 1.0  # one second a model call, batch or single token
            super()._write(tokens, batched)

    llm = TimedLlama(tie_lengths={len(PROMPT) + 25})
    drafter = FixedDrafter(llm, batches=2)
    assert run(drafter, 30) == plain_greedy(30)
    assert drafter.tie_steps == 1 and drafter.rebuilt > 1
    # each plain step is one call; the rebuild's calls (one per rebuilt cell) go to the drafts' account
    assert drafter.plain_s == pytest.approx(drafter.plain_steps * 1.0)
    assert drafter.rebuild_s == pytest.approx(drafter.rebuilt * 1.0)
    assert drafter.batch_s >= drafter.rebuild_s + drafter.batch_steps
