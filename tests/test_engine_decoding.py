"""app.engine.decoding on the real default model: the logits the sampler reads are llama.cpp's, token after token."""

from __future__ import annotations

from pathlib import Path

import llama_cpp  # a hard dependency: a broken install must fail here, not skip
import numpy as np

from app.core.sampling import Sampler, SamplerParams
from app.engine import decoding


def test_logits_row_is_llama_cpps_current_row_after_every_decode(default_model: Path) -> None:
    llm = llama_cpp.Llama(str(default_model), n_ctx=256, n_threads=2, verbose=False)
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


def test_plain_tokens_greedy_matches_llama_cpps_own_greedy_generate(default_model: Path) -> None:
    llm = llama_cpp.Llama(str(default_model), n_ctx=256, n_threads=2, verbose=False)
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
