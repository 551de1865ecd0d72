"""Token sampling on a logits vector: llama.cpp's default chain, computed only where it matters.

llama-cpp-python samples with llama.cpp's chain penalties → top-k → typical → top-p → min-p → temperature →
dist. That chain starts by building a 262,144-entry candidate array for Gemma's vocabulary and its
penalties step walks all of it: ~0.9 ms a token here, 7 % of a 12 ms decode step of the default model.

`Sampler` applies the same steps with the same rules, but looks only at the tokens that can still matter:
after the (≤ 64) penalised logits are adjusted, the top-k set is found among the tokens within a margin
of the best logit, and everything further down is left out. A token `d` logits below the best has
relative weight e^-d, so with margins of 20 (top-k) and 30 (no top-k) logits — scaled by the temperature
when it is above 1 — what is left out weighs under 1e-7 of the distribution: below float32's resolution,
the precision llama.cpp itself computes in. The test suite checks the resulting distribution against
llama.cpp's own chain. Cost inside the decode loop: ~0.45 ms a token (a max, a compare, a nonzero and a
partition over the row, on caches the decode step has just flushed).

With top-k set (the default), the top-k set comes instead from app.core.sampling._topk, a small C function built
at install time that finds it in one pass over the row: ~0.19 ms a token in all inside the decode loop,
2 % of a decode step of the default model saved. Its exact top-k is cut at the same margin as above, so
both paths keep the same tokens. Without a C compiler the module is not built and numpy does the work;
the tests run every case through both.

A `TokenConstraint` (app.core.sampling.constraint: a JSON schema, say) masks the row before the chain: the
tokens it forbids are -inf, so every step above sees only what the grammar allows. With `logprobs` set, each
draw also records the drawn token's log-probability and the most likely alternatives, from the model's own
row (before penalties and mask, as llama-server reports them): one log-sum-exp over the row, only when asked.

The random stream is numpy's (PCG64), not llama.cpp's mt19937: the same seed gives the same reply every
time, but not the reply llama.cpp's sampler would have drawn. No llama_cpp, no Qt (numpy, and the
optional C module of this package).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from app.core.sampling.logprobs import TokenLogprob, token_logprob

if TYPE_CHECKING:
    from app.core.sampling.constraint import TokenConstraint

native_topk: ModuleType | None
try:  # the optional C top-k (app/core/sampling/_topk.c); numpy does the same work where it is not built
    from app.core.sampling import _topk as native_topk
except ImportError:  # pragma: no cover - depends on the install having had a C compiler
    native_topk = None

NEAR_MARGIN = 10.0  # logits: first look for the top-k set this close to the best logit (usually enough)
TOP_K_MARGIN = 20.0  # a top-k member further down weighs < e^-20 ≈ 2e-9 of the best: left out
TAIL_MARGIN = 30.0  # without top-k, all 262k tokens count: e^-30 × 262144 ≈ 2.5e-8 of the mass is left out
SMALL = 256  # candidate sets up to this size are finished in plain Python (numpy's per-call cost dominates)
PENALTY_LAST_N = 64  # llama-cpp-python's last_n_tokens_size: the window the penalties look at
NATIVE_TOP_K_MAX = 1024  # the C top-k keeps a k-entry heap: for larger k numpy's partition is as good


@dataclass(frozen=True)
class SamplerParams:
    """The chain's knobs, named and defaulted like llama-cpp-python's `Llama.generate`.

    temperature 0 is greedy (penalties, then the best token); below 0 samples the whole penalised
    distribution without truncation or temperature, as llama-cpp-python does."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = PENALTY_LAST_N

    @property
    def penalises(self) -> bool:
        return self.penalty_last_n != 0 and (
            self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0)


class Sampler:
    """Draws tokens from logits; remembers the accepted tokens the penalties look at.

    Like llama.cpp's chain as llama-cpp-python builds it per `generate` call, only tokens accepted by
    this sampler (the reply so far) are penalised, not the prompt."""

    def __init__(self, params: SamplerParams, n_vocab: int, seed: int,
                 constraint: TokenConstraint | None = None, logprobs: int | None = None) -> None:
        self.params = params
        self.constraint = constraint
        self.logprobs_top = logprobs  # None: no log-probabilities; else how many alternatives each
        self.logprobs: list[TokenLogprob] = []
        self.n_vocab = n_vocab
        self._mask = np.empty(n_vocab, dtype=bool)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        window = params.penalty_last_n if params.penalty_last_n > 0 else None  # -1: the whole reply
        self.recent: deque[int] = deque(maxlen=window)
        self._counts: dict[int, int] = {}  # token → occurrences in `recent`, kept as tokens come and go

    def accept(self, token: int) -> None:
        token = int(token)
        if self.recent.maxlen is not None and len(self.recent) == self.recent.maxlen:
            old = self.recent[0]
            if self._counts[old] == 1:
                del self._counts[old]
            else:
                self._counts[old] -= 1
        self.recent.append(token)
        self._counts[token] = self._counts.get(token, 0) + 1

    def _penalise(self, x: np.ndarray) -> list[tuple[int, float]]:
        """Apply the penalties to `x` in place; returns (token, original logit) pairs to undo it.

        A plain loop: ≤ 64 tokens, where each numpy call would cost more than the arithmetic."""
        p = self.params
        if not (p.penalises and self._counts):
            return []
        rp, fp, pp = p.repeat_penalty, p.frequency_penalty, p.presence_penalty
        saved = []
        for tok, count in self._counts.items():
            v = float(x[tok])
            saved.append((tok, v))
            # llama.cpp: a positive logit is divided by the penalty, a negative one multiplied (both lower it)
            new = v * rp if v <= 0 else v / rp
            if fp or pp:
                new -= count * fp + pp
            x[tok] = new
        return saved

    def penalised(self, logits: np.ndarray) -> np.ndarray:
        """A copy of the logits after the repeat/frequency/presence penalties."""
        x = np.array(logits[: self.n_vocab], dtype=np.float32)
        self._penalise(x)
        return x

    def distribution(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(token ids, probabilities) the next token is drawn from, most likely first."""
        ids, weights = self._candidates(logits if self.constraint is None else self.constraint.masked(logits))
        w = np.asarray(weights)
        return np.asarray(ids), w / w.sum()

    def sample(self, logits: np.ndarray) -> int:
        """Draw the next token from `logits` (one row, at least n_vocab floats) and accept it."""
        row = logits if self.constraint is None else self.constraint.masked(logits[: self.n_vocab])
        ids, weights = self._candidates(row)
        token = ids[0]
        if len(ids) > 1:
            r = self._rng.random() * sum(weights)
            acc = 0.0
            for token, w in zip(ids, weights, strict=True):  # noqa: B007 - the last one stands if r rounds up
                acc += w
                if acc > r:
                    break
        if self.logprobs_top is not None:
            self.logprobs.append(token_logprob(logits[: self.n_vocab], token, self.logprobs_top))
        self.accept(token)
        if self.constraint is not None:
            self.constraint.accept(token)
        return token

    def _candidates(self, logits: np.ndarray) -> tuple[list[int], list[float]]:
        """(token ids, unnormalised weights), most likely first.

        A writable `logits` is penalised in place for the duration of the call and restored before it
        returns (copying a 262k row would cost more than everything else here); others are copied."""
        x = logits[: self.n_vocab]
        if not x.flags.writeable:
            x = x.copy()
        saved = self._penalise(x)
        try:
            return self._select(x)
        finally:
            for tok, v in saved:
                x[tok] = v

    def _select(self, x: np.ndarray) -> tuple[list[int], list[float]]:
        p = self.params
        if p.temperature == 0.0:
            return [int(np.argmax(x))], [1.0]
        if (native_topk is not None and 0 < p.top_k <= NATIVE_TOP_K_MAX and p.temperature > 0.0
                and x.dtype == np.float32 and x.flags.c_contiguous):
            ids_list, vals = native_topk.top_k(x, p.top_k)  # largest first, one pass over the row
            if vals:
                # the numpy path's cut (TOP_K_MARGIN): further down a token weighs < 1e-8 of the best
                floor = vals[0] - TOP_K_MARGIN * max(1.0, p.temperature)
                n = len(vals)
                while n > 1 and vals[n - 1] < floor:
                    n -= 1
                return self._finish_sorted(list(zip(vals[:n], ids_list[:n], strict=True)), p.temperature,
                                           p.top_p, p.min_p)
        best = float(x.max())
        if p.temperature < 0.0:  # llama-cpp-python: penalties, then a plain draw over everything
            return self._finish(self._at_least(x, best - TAIL_MARGIN), x, 1.0, 1.0, 0.0)
        scale = max(1.0, p.temperature)  # a hotter distribution flattens the tail: look further down
        if p.top_k > 0:
            ids = self._at_least(x, best - NEAR_MARGIN * scale)
            if ids.size < p.top_k:
                ids = self._at_least(x, best - TOP_K_MARGIN * scale)
            if ids.size > p.top_k:
                keep = np.argpartition(x[ids], ids.size - p.top_k)[ids.size - p.top_k:]
                ids = ids[keep]
        else:
            ids = self._at_least(x, best - TAIL_MARGIN * scale)
        return self._finish(ids, x, p.temperature, p.top_p, p.min_p)

    def _at_least(self, x: np.ndarray, threshold: float) -> np.ndarray:
        np.greater_equal(x, threshold, out=self._mask)
        return np.flatnonzero(self._mask)

    @staticmethod
    def _finish(ids: np.ndarray, x: np.ndarray, temperature: float, top_p: float,
                min_p: float) -> tuple[list[int], list[float]]:
        """top-p, then min-p (both at temperature 1), then temperature, on the candidates `ids`."""
        if ids.size > SMALL:
            return Sampler._finish_large(ids, x, temperature, top_p, min_p)
        pairs = sorted(zip(x[ids].tolist(), ids.tolist(), strict=True), key=lambda vt: -vt[0])
        return Sampler._finish_sorted(pairs, temperature, top_p, min_p)

    @staticmethod
    def _finish_sorted(pairs: list[tuple[float, int]], temperature: float, top_p: float,
                       min_p: float) -> tuple[list[int], list[float]]:
        """`_finish` on (logit, token) pairs already sorted largest first."""
        top = pairs[0][0]
        n = len(pairs)
        if top_p < 1.0:  # smallest prefix whose probability reaches top_p
            ws = [math.exp(v - top) for v, _ in pairs]
            target, acc = top_p * sum(ws), 0.0
            for i, w in enumerate(ws):
                acc += w
                if acc >= target:
                    n = i + 1
                    break
        if min_p > 0.0:  # tokens at least min_p as likely as the best one
            limit = math.log(min_p)
            m = 0
            while m < n and pairs[m][0] - top >= limit:
                m += 1
            n = max(1, m)
        kept = pairs[:n]
        return [t for _, t in kept], [math.exp((v - top) / temperature) for v, _ in kept]

    @staticmethod
    def _finish_large(ids: np.ndarray, x: np.ndarray, temperature: float, top_p: float,
                      min_p: float) -> tuple[list[int], list[float]]:
        """`_finish` for thousands of candidates (no top-k): the same rules, vectorised.

        With min-p, only the tokens it keeps are sorted: both cuts keep a prefix of the sorted candidates,
        so the result is the shorter prefix, and top-p's needs only the total mass, not a full sort. Sorting
        Gemma's ~100k candidates took ~30 ms a token; min-p (0.05) usually leaves a handful."""
        vals = x[ids].astype(np.float64)
        vals -= vals.max()
        target = top_p * float(np.exp(vals).sum()) if top_p < 1.0 else math.inf
        if min_p > 0.0:
            keep = np.flatnonzero(vals >= math.log(min_p))  # never empty: the best token has 0
            ids, vals = ids[keep], vals[keep]
        order = np.argsort(-vals, kind="stable")
        ids, vals = ids[order], vals[order]
        n = ids.size
        if top_p < 1.0:
            cum = np.cumsum(np.exp(vals))
            n = min(n, int(np.searchsorted(cum, target, side="left")) + 1)
        return ids[:n].tolist(), np.exp(vals[:n] / temperature).tolist()
