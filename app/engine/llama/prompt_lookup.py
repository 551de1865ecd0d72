"""Prompt-lookup speculative decoding on a loaded `llama_cpp.Llama`, without a draft model.

Why our own: llama-cpp-python's `LlamaPromptLookupDecoding` needs `Llama(draft_model=...)`, which forces
`logits_all=True` and allocates n_ctx × n_vocab float32 scores (4 GB for Gemma's 262k vocabulary at n_ctx
4096). Here the drafted tokens are decoded in ONE batch with logits only at the batch positions (the
pending token and the drafts), each position is sampled by the plain path's `Sampler`
(app.core.sampling.chain), the longest agreeing prefix is kept, and the rejected tail is removed from the KV
cache. With greedy sampling the output is the plain path's output, token for token; only the number of
model calls changes. A batch rounds differently from one-token steps, so every greedy choice whose top two
candidates are closer than TIE_MARGIN, and that would be made on cells a batch wrote, is made again on cells
rebuilt one token at a time (`clean` marks where those end).

Imported only by the engine worker (it touches llama.cpp through the `Llama` object it is handed).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import numpy as np

from app.core.sampling.chain import Sampler
from app.engine.llama.context_overflow import context_limit
from app.engine.llama.decoding import logits_row, prefill

MAX_NGRAM = 3  # longest n-gram of recent tokens looked up in the history
MIN_NGRAM = 2  # a single matching token is weak evidence: in free text its drafts are mostly rejected
MAX_DRAFT = 8  # most tokens drafted per step: a longer batch costs more when it is rejected
PAUSE_TOKENS = 48  # plain tokens before lookup is tried again after losing
REFERENCE_STEPS = 3  # plain steps first when no plain rate is known: the speed-up and the pause need one
TIE_MARGIN = 2.0  # logits: 1.5x the most a batch changed the gap between the top candidate and any of the next
# nine (1.31 on the default model: 8 prompts x 60 tokens, batches of 2-8 on batch-written cells; measured by
# scripts/bench_batch_rounding, docs/bench/2026-12-01-batch-rounding-epyc-avx2.txt). A choice can only flip
# where that gap changes by more than the gap itself. A wider margin (3.0) makes most of a base model's steps
# ties (80 % of the default model's), and a draft then gets none accepted (tests/engine/llama/test_draft_model.py).


def find_draft(history: list[int] | np.ndarray, max_ngram: int = MAX_NGRAM, max_draft: int = MAX_DRAFT,
               min_ngram: int = 1) -> list[int]:
    """Tokens that followed the most recent earlier occurrence of the longest matching tail n-gram.

    Same idea as llama_cpp.llama_speculative.LlamaPromptLookupDecoding (longest n-gram first), but the
    latest match wins: in a chat the newest copy of a passage is the likeliest to be repeated next.
    """
    ids = np.asarray(history, dtype=np.int64)
    n = ids.shape[0]
    for size in range(min(max_ngram, n - 1), max(1, min_ngram) - 1, -1):
        tail = ids[n - size:]
        # windows over ids[:-1]: a match must have at least one token after it
        windows = np.lib.stride_tricks.sliding_window_view(ids[:n - 1], size)
        hits = np.nonzero(np.all(windows == tail, axis=1))[0]
        hits = hits[hits + size < n]
        if hits.size:
            start = int(hits[-1]) + size
            return [int(t) for t in ids[start:min(start + max_draft, n)]]
    return []


class PromptLookup:
    """A token generator like `Llama.generate`, verifying prompt-lookup drafts in batches.

    Counters `drafted` / `accepted` feed PhaseMetrics.draft_tokens / draft_accepted; `plain_steps` and
    `batch_steps` count model calls of each kind. Closing the generator early leaves the KV cache and
    `llm.n_tokens`/`input_ids` exactly as the plain path would (prompt + emitted tokens minus the last).
    """

    drafter = "prompt lookup"  # what proposes the drafts, as the metrics name it

    def __init__(self, llm: Any, sampler: Sampler, *, max_ngram: int = MAX_NGRAM, max_draft: int = MAX_DRAFT,
                 min_ngram: int = MIN_NGRAM, tie_margin: float = TIE_MARGIN,
                 plain_ms_hint: float | None = None) -> None:
        self.llm = llm
        self.sampler = sampler  # the plain path's sampler: the same distribution at every position
        self.plain_ms_hint = plain_ms_hint  # ms/token of plain decoding seen before (the engine's last run)
        self.paused_until = 0  # drafting is paused while batches cost more per token than plain steps
        self.pauses = 0
        self._win_s, self._win_tokens, self._win_steps = 0.0, 0, 0  # recent batches, for that decision
        # Greedy only: a batched position whose top two candidates are closer than this is decided again
        # with a single-token evaluation, because batched logits differ slightly from single-token ones.
        self.tie_margin = tie_margin if sampler.params.temperature <= 0 else 0.0
        self.tie_steps = 0
        self.rebuilt = 0  # batch-written cells recomputed one token at a time at near-ties
        self.clean = 0  # cells before this index hold exactly what one-token steps would write
        self.rebuild_s = 0.0  # wall time of those rebuilds
        # Draft length adapts: on a CPU a batch costs roughly its length in compute (the output matrix of a
        # big vocabulary dominates), so draft about as far as drafts have recently been right.
        self.k = min(4, max_draft)
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.max_draft = max(1, min(max_draft, llm.n_batch - 1))
        self.drafted = 0
        self.accepted = 0
        self.plain_steps = 0
        self.batch_steps = 0
        self.plain_s = 0.0  # wall time of single-token steps (the "off" speed, same run, same depth)
        self.batch_s = 0.0  # wall time of draft batches, sampling included
        self.batch_tokens = 0  # tokens those batches produced

    def speedup(self, fallback_plain_ms: float | None = None) -> float | None:
        """Measured decode speed-up vs plain decoding: plain ms/token over effective ms/token.

        The plain rate comes from this run's own single-token steps, else from `fallback_plain_ms`
        (the engine's last generation without lookup); None when neither exists."""
        plain_ms = 1000.0 * self.plain_s / self.plain_steps if self.plain_steps else fallback_plain_ms
        tokens = self.plain_steps + self.batch_tokens
        if not plain_ms or tokens == 0:
            return None
        effective_ms = 1000.0 * (self.plain_s + self.batch_s) / tokens
        return plain_ms / effective_ms if effective_ms > 0 else None

    def _maybe_pause(self, emitted: int) -> None:
        """Stop drafting for a while when verified batches have cost more per token than plain steps.

        On a CPU where even decode is compute-bound (small model, big vocabulary) verification costs about
        as much per token as decoding, so lookup can only lose; this keeps the loss to a few batches."""
        plain = 1000.0 * self.plain_s / self.plain_steps if self.plain_steps >= 2 else self.plain_ms_hint
        if plain is None or self._win_steps < 3 or self._win_tokens == 0:
            return
        if 1000.0 * self._win_s / self._win_tokens > plain:
            self.paused_until = emitted + PAUSE_TOKENS
            self.pauses += 1
        self._win_s, self._win_tokens, self._win_steps = 0.0, 0, 0  # judge the next batches on their own

    def draft(self, history: list[int], k: int) -> list[int]:
        """Up to `k` tokens that may come next (a draft model overrides this: app.engine.llama.draft_model)."""
        return find_draft(history, self.max_ngram, k, self.min_ngram)

    def _sample(self, idx: int) -> int:
        return self.sampler.sample(logits_row(self.llm, idx))

    def _near_tie(self, idx: int) -> bool:
        """Top two candidates at batch row `idx` (after the penalties) closer than tie_margin."""
        x = self.sampler.penalised(logits_row(self.llm, idx))  # a copy: free to change
        best = int(x.argmax())
        top = float(x[best])
        x[best] = -np.inf
        return bool(top - float(x.max()) < self.tie_margin)  # two passes: ~0.1 ms vs 1.3 for a partition (262k)

    def _trim(self, keep: int) -> None:
        llm = self.llm
        if llm.n_tokens > keep:
            if not llm._ctx.kv_cache_seq_rm(-1, keep, -1):
                raise RuntimeError("llama.cpp could not remove rejected draft tokens from the KV cache")
            llm.n_tokens = keep

    def _decide_alone(self, history: list[int], upto: int) -> int:
        """The next token after history[:upto] exactly as the plain path computes it.

        The KV cells from `self.clean` on were written by a verification batch, whose matrix kernels
        (llama.cpp's tinyBLAS for two or more columns) round differently from one-token steps; they are
        dropped and rebuilt one token at a time, so the logits are bit for bit the plain path's."""
        llm = self.llm
        t0 = time.perf_counter()
        self.tie_steps += 1
        self.rebuilt += upto - self.clean
        self._trim(self.clean)
        for t in history[self.clean:upto]:
            llm.eval([t])
        self.clean = llm.n_tokens
        token = self._sample(-1)
        self.rebuild_s += time.perf_counter() - t0
        return token

    def generate(self, prompt: list[int]) -> Generator[int, None, None]:
        llm = self.llm
        n_ctx = context_limit(llm)  # not llm.n_ctx(): llama.cpp pads a small context past what input_ids holds
        first_row = prefill(llm, prompt)  # the same call as the plain path's
        self.clean = llm.n_tokens  # cells before this were computed as the plain path computes them
        history = list(prompt)
        emitted = 0
        try:
            token = self.sampler.sample(first_row)
            history.append(token)
            while True:
                emitted += 1
                yield token
                n_past = llm.n_tokens
                room = n_ctx - n_past - 1
                if room <= 0:
                    return
                # Without a plain rate from earlier (a one-shot `roofline chat`), a draft model would draft at
                # every step: no measured speed-up, and no pause when drafting loses. A few plain steps first.
                reference = self.plain_ms_hint is None and self.plain_steps < REFERENCE_STEPS
                draft = [] if reference or emitted < self.paused_until else self.draft(history, min(self.k, room))
                if not draft:
                    t0, rebuild_before = time.perf_counter(), self.rebuild_s
                    llm.eval([token])
                    if self.clean == n_past:
                        self.clean = llm.n_tokens
                        token = self._sample(-1)
                    elif self.tie_margin > 0 and self._near_tie(-1):
                        # a step on top of batch-written cells: exact unless the top two are close
                        token = self._decide_alone(history, llm.n_tokens)
                    else:
                        token = self._sample(-1)
                    rebuilt_s = self.rebuild_s - rebuild_before  # a cost of having drafted, not of plain steps
                    self.plain_s += time.perf_counter() - t0 - rebuilt_s
                    self.batch_s += rebuilt_s
                    self.plain_steps += 1
                    history.append(token)
                    continue
                self.batch_steps += 1
                t0 = time.perf_counter()
                batch = [token, *draft]
                # One decode for the pending token and its drafts, logits at every batch position.
                llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
                llm._ctx.decode(llm._batch)
                llm.input_ids[n_past:n_past + len(batch)] = batch
                llm.n_tokens = n_past + len(batch)
                self.drafted += len(draft)
                out: list[int] = []
                for i in range(len(batch)):
                    if self.tie_margin > 0 and self._near_tie(i):
                        # decide this position as the plain path would, from cells it would have written
                        out.append(self._decide_alone(history + out, n_past + i + 1))
                        break
                    t = self._sample(i)
                    out.append(t)
                    if i == len(draft) or t != draft[i]:
                        break  # first disagreement (or the bonus token after a fully accepted draft)
                good = len(out) - 1
                self.accepted += good
                self.k = min(self.max_draft, self.k + 2) if good == len(draft) else max(2, good + 1)
                self._trim(n_past + 1 + good)  # keep the pending token and the accepted drafts
                dt = time.perf_counter() - t0
                self.batch_s += dt
                self.batch_tokens += len(out)
                self._win_s += dt
                self._win_tokens += len(out)
                self._win_steps += 1
                self._maybe_pause(emitted)
                history.extend(out)
                for t in out[:-1]:
                    emitted += 1
                    yield t
                token = out[-1]
        finally:
            # Same state as the plain path: every emitted token but the last is in the cache.
            self._trim(len(prompt) + max(0, emitted - 1))
