"""app.engine.llama.decoding on the real default model: the logits the sampler reads are llama.cpp's, token
after token. One load of the model serves the module (a load per test was most of its time); each test starts
from an empty cache and no kept prefill, as after a fresh load."""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp  # a hard dependency: a broken install must fail here, not skip
import numpy as np
import pytest

from app.core.sampling.chain import Sampler, SamplerParams
from app.engine.llama import decoding


def _load(model: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(model), n_ctx=256, n_threads=2, verbose=False)


@pytest.fixture(scope="module")
def loaded(default_model: Path) -> llama_cpp.Llama:
    return _load(default_model)


@pytest.fixture
def llm(loaded: llama_cpp.Llama) -> llama_cpp.Llama:
    """The module's model as a fresh load has it: no tokens, an empty KV cache, no kept prefill row."""
    decoding.forget_prefill(loaded)
    loaded.reset()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(loaded._ctx.ctx), True)
    return loaded


def test_logits_row_is_llama_cpps_current_row_after_every_decode(llm: llama_cpp.Llama) -> None:
    prompt = llm.tokenize(b"The capital of France is", add_bos=True)
    llm.eval(prompt[:-1])
    llm.eval(prompt[-1:])  # the last prompt token alone: its row is the only output
    rows = []
    for _ in range(4):
        row = decoding.logits_row(llm)
        # the same row through llama.cpp's other accessor (the whole output buffer: one row after a 1-token batch)
        whole = llama_cpp.llama_get_logits(llm._ctx.ctx)
        assert np.array_equal(row, np.array(whole[: llm.n_vocab()], dtype=np.float32))
        rows.append(row.copy())
        llm.eval([int(np.argmax(row))])
    assert not np.array_equal(rows[0], rows[1])  # each decode's row, not a stale copy of the first
    # a reused view and a fresh one read the same memory
    fresh = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))
    assert np.array_equal(decoding.logits_row(llm), fresh)


def test_plain_tokens_greedy_matches_llama_cpps_own_greedy_generate(llm: llama_cpp.Llama) -> None:
    prompt = llm.tokenize(b"Count: one, two, three,", add_bos=True)
    ours = []
    for tok in decoding.plain_tokens(llm, prompt, Sampler(SamplerParams(temperature=0.0), llm.n_vocab(), 0)):
        ours.append(tok)
        if len(ours) == 12:
            break
    llm.reset()
    theirs = []
    for tok in llm.generate(prompt, top_k=1, temp=0.0, repeat_penalty=1.0, reset=True):
        theirs.append(tok)
        if len(theirs) == 12:
            break
    assert ours == theirs


def _prompt_evals(llm: llama_cpp.Llama) -> tuple[int, int]:
    """Tokens llama.cpp has evaluated so far in batches and one at a time (read as the engine reads them)."""
    from app.engine.llama.worker.generate import read_perf

    perf = read_perf(llm)
    return perf.n_p_eval, perf.n_eval


def test_the_same_prompt_again_keeps_the_first_prefills_cells_and_logits(llm: llama_cpp.Llama,
                                                                         default_model: Path) -> None:
    # A regenerated reply (same seed) must see the very logits and cells the first one saw: evaluating the last
    # prompt token again alone rounds differently from the batch that first evaluated it (~1 logit on some CPUs).
    prompt = llm.tokenize(b"Tell me a story about a fox.", add_bos=True)
    first = decoding.prefill(llm, prompt)
    first[:] = 0.0  # the caller's copy to change: the kept row is not touched
    for _ in range(3):  # a reply continues past the prompt
        llm.eval([int(np.argmax(decoding.logits_row(llm)))])
    assert llm.n_tokens == len(prompt) + 3
    before = _prompt_evals(llm)
    again = decoding.prefill(llm, prompt)
    assert _prompt_evals(llm) == before  # nothing evaluated
    assert llm.n_tokens == len(prompt)
    assert llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(llm._ctx.ctx), 0) == len(prompt) - 1
    llm2 = _load(default_model)  # a context of its own: a row that aliased llm's buffer cannot pass
    llm2.eval(prompt)  # the same prompt as one batch, elsewhere: the row the first prefill returned
    assert np.array_equal(again, decoding.logits_row(llm2))


def test_a_changed_or_forgotten_prompt_is_evaluated_again(llm: llama_cpp.Llama) -> None:
    prompt = llm.tokenize(b"Tell me a story about a fox.", add_bos=True)
    decoding.prefill(llm, prompt)
    before = _prompt_evals(llm)
    decoding.prefill(llm, prompt[:-1])  # a shorter prompt: its last token's logits were never kept
    assert sum(_prompt_evals(llm)) == sum(before) + 1  # its last token, evaluated alone
    decoding.prefill(llm, prompt)  # the kept prompt is now the shorter one
    assert sum(_prompt_evals(llm)) == sum(before) + 2
    decoding.forget_prefill(llm)  # what a context shift or a restored cache does
    decoding.prefill(llm, prompt)
    assert sum(_prompt_evals(llm)) == sum(before) + 3


def test_a_context_shift_and_a_restored_cache_forget_the_kept_prefill(llm: llama_cpp.Llama) -> None:
    from app.engine.llama.context_overflow import ContextOverflow
    from app.engine.llama.worker import saved_kv

    prompt = llm.tokenize(b"Tell me a story about a fox.", add_bos=True)
    decoding.prefill(llm, prompt)
    assert llm in decoding._LAST_PREFILL
    ContextOverflow(policy="rolling", n_keep=2, limit=llm.n_tokens)._shift(llm, 1)
    assert llm not in decoding._LAST_PREFILL
    decoding.prefill(llm, prompt)
    size = llama_cpp.llama_state_seq_get_size(llm._ctx.ctx, 0)
    state = bytearray(size)
    buf = (ctypes.c_uint8 * size).from_buffer(state)
    assert llama_cpp.llama_state_seq_get_data(llm._ctx.ctx, buf, size, 0) == size
    saved_kv._load(llm, state, list(prompt))
    assert llm not in decoding._LAST_PREFILL and llm.n_tokens == len(prompt)
