"""The decode loop the chat uses: reuse the cached prefix, prefill the rest, then one token per step.

It stands in for llama-cpp-python's `Llama.generate` for one reason, sampling: `generate` samples with
llama.cpp's chain over a full candidate array, which for Gemma's 262k-token vocabulary costs ~0.9 ms a
token here (7 % of a decode step of the default model); this loop reads the logits row in place and
samples with app.core.sampling.chain (~0.2 ms here with its C top-k, the same distribution). The bookkeeping
(`n_tokens`, `input_ids`, KV trimming) stays `Llama`'s own, so prefix reuse across turns and prompt lookup
still work.

Imported only by the engine worker (and by speculative.py, which only the worker imports).
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np

from app.core.sampling.chain import Sampler

_VIEWS: dict[tuple[int, int], np.ndarray] = {}  # (address, length) -> a numpy view of that memory
_VIEWS_KEPT = 16


def logits_row(llm: Any, idx: int = -1) -> np.ndarray:
    """Row `idx` of the last batch's logits (-1: the last row), viewed in place until the next decode.

    llama.cpp writes each token's logits to the same place, so the view of an address is made once and
    reused (prompt lookup reads a few rows of a batch: a few addresses): numpy's `as_array` builds a ctypes
    array type each call (~0.02 ms a token: docs/bench/2026-11-29-gui-streaming.md). A view is just
    (address, length): a reused one reads exactly what a fresh one would."""
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, idx)
    address = ctypes.cast(ptr, ctypes.c_void_p).value
    if not address:
        raise RuntimeError(f"llama.cpp has no logits for batch row {idx}")
    key = (address, llm.n_vocab())
    view = _VIEWS.get(key)
    if view is None:
        if len(_VIEWS) >= _VIEWS_KEPT:
            _VIEWS.clear()
        view = _VIEWS[key] = np.ctypeslib.as_array(ptr, shape=(key[1],))
    return view


def reuse_prefix(llm: Any, prompt: Sequence[int]) -> int:
    """Keep the longest cached prefix of `prompt` in the KV cache and drop the rest; returns its length.

    At least one prompt token is always left to evaluate, so the logits the first sample reads are fresh.
    A cache that cannot drop a tail (some sliding-window and recurrent caches) starts over from zero."""
    limit = min(llm.n_tokens, len(prompt) - 1)
    prefix = 0
    if limit > 0:
        cached = llm.input_ids[:limit]
        differ = np.nonzero(cached != np.asarray(prompt[:limit], dtype=cached.dtype))[0]
        prefix = int(differ[0]) if differ.size else limit
    if prefix > 0 and not llm._ctx.kv_cache_seq_rm(-1, prefix, -1):
        prefix = 0
    if prefix == 0:
        llm.reset()  # also clears recurrent/hybrid memory, which a position-based removal cannot
    llm.n_tokens = prefix
    return prefix


@dataclass(frozen=True)
class _Prefilled:
    tokens: np.ndarray  # the prompt the last prefill brought the cache to
    logits: np.ndarray  # its logits row for the next token, as that prefill computed it


_LAST_PREFILL: weakref.WeakKeyDictionary[Any, _Prefilled] = weakref.WeakKeyDictionary()


def forget_prefill(llm: Any) -> None:
    """Drop the kept prefill of `llm`: call it whenever KV cells are rewritten other than by `prefill`
    (a context shift, a restored cache)."""
    _LAST_PREFILL.pop(llm, None)


def prefill(llm: Any, prompt: Sequence[int]) -> np.ndarray:
    """Bring the KV cache to `prompt` and return the logits row for the token after it; the caller may change
    the row (it is llama.cpp's, rewritten by the next decode, or a copy of the kept one).

    When the cache still holds exactly the prompt the last prefill evaluated (a regenerated reply, the same
    request again), nothing is evaluated: the cells and the logits row of that prefill are kept. Evaluating
    the last prompt token again on its own, as llama.cpp's reuse does, would not give the same logits: its
    one-token kernels round differently from a batch's (up to ~1 logit on the default model), so the same
    seed would sample another reply. Keeping the row costs one copy of it (1 MB for a 262k vocabulary)."""
    n = len(prompt)
    kept = _LAST_PREFILL.get(llm)
    if (kept is not None and n > 0 and llm.n_tokens >= n
            and np.array_equal(kept.tokens, np.asarray(prompt, dtype=kept.tokens.dtype))
            and np.array_equal(llm.input_ids[:n], kept.tokens)
            and llm._ctx.kv_cache_seq_rm(-1, n, -1)):
        llm.n_tokens = n
        return kept.logits.copy()
    forget_prefill(llm)  # cells are about to change: an error half-way must not leave a stale row behind
    prefix = reuse_prefix(llm, prompt)
    _eval_in_chunks(llm, list(prompt[prefix:]))
    row = logits_row(llm)
    if n > 0:
        _LAST_PREFILL[llm] = _Prefilled(np.array(prompt, dtype=llm.input_ids.dtype), row.copy())
    return row


# Told after each chunk of a prefill: (tokens done, tokens in all). One generation runs at a time in an engine
# process, so the worker sets it around a request (`prefill_progress`) instead of threading it through every
# token source (plain, rolling, prompt lookup, draft model), which all prefill through `prefill`.
_PROGRESS: list[Callable[[int, int], None]] = []


@contextmanager
def prefill_progress(report: Callable[[int, int], None]) -> Iterator[None]:
    """`report(done, total)` after each n_batch chunk of the prefills run inside the block."""
    _PROGRESS.append(report)
    try:
        yield
    finally:
        _PROGRESS.remove(report)


def _eval_in_chunks(llm: Any, tokens: list[int]) -> None:
    """llm.eval(tokens), one n_batch chunk at a time, as Llama.eval walks them itself (the same batches, the
    same cells and logits), with the progress told between chunks."""
    report = _PROGRESS[-1] if _PROGRESS else None
    step = max(int(llm.n_batch), 1)
    if report is None or len(tokens) <= step:
        llm.eval(tokens)
        return
    for start in range(0, len(tokens), step):
        llm.eval(tokens[start:start + step])
        report(min(start + step, len(tokens)), len(tokens))


def plain_tokens(llm: Any, prompt: Sequence[int], sampler: Sampler) -> Generator[int, None, None]:
    """Tokens of the reply to `prompt`, one model call each; the caller stops by closing the generator.

    Afterwards the cache holds the prompt and every yielded token but the last (as after `Llama.generate`)."""
    row = prefill(llm, prompt)
    n_ctx = llm.n_ctx()
    ctx, batch = llm._ctx, llm._batch
    while True:
        token = sampler.sample(row)
        yield token
        n = llm.n_tokens
        if n >= n_ctx:
            return
        # What Llama.eval([token]) does, minus its per-call KV removal past n_tokens (nothing is there)
        batch.set_batch(batch=[token], n_past=n, logits_all=False)
        ctx.decode(batch)  # raises on failure
        llm.input_ids[n] = token
        llm.n_tokens = n + 1
        row = logits_row(llm)
