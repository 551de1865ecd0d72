"""The batch engine's slots: which slot a new request takes (the one whose cached prefix helps it most, else an
empty one, else the least recently used cache), what prefix it reuses (its own slot's, or another slot's cells
shared through llama_memory_seq_cp), and what a finished, cancelled or failed request leaves in its slot.
A part of `BatchEngine` (app.engine.llama.batch.engine), which owns the context and the steps."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import llama_cpp
import numpy as np

from app.engine import protocol as P
from app.engine.llama.batch.sequence import Sequence
from app.engine.llama.worker.stream import send

MIN_SHARED_PREFIX = 16  # tokens: a shorter prefix held by another slot is not worth a copy


def common_prefix(cached: list[int], prompt: list[int], limit: int) -> int:
    """Length of the common prefix of two token lists, at most `limit`."""
    n = min(len(cached), len(prompt), limit)
    if n <= 0:
        return 0
    differ = np.nonzero(np.asarray(cached[:n]) != np.asarray(prompt[:n]))[0]
    return int(differ[0]) if differ.size else n


class Slots:
    """The slot bookkeeping of `BatchEngine`; its attributes are made by `BatchEngine.__init__`."""

    slots: list[Sequence | None]
    slot_kv: list[list[int]]  # tokens each seq_id holds
    slot_used_at: list[float]
    slot_salt: list[str]  # whose prefix each slot's cache is (cache_salt)
    waiting: deque[Sequence]
    by_id: dict[str, Sequence]
    tokenizing: dict[str, tuple[P.Generate, float]]
    cancelled_early: set[str]
    _stats_due: bool
    _mem: Any  # the context's llama_memory_t, a property of BatchEngine
    def drop_caches(self) -> None:
        """Free the cells of every idle slot's cached prefix (see messages.DropCaches)."""
        for i, seq in enumerate(self.slots):
            if seq is None and self.slot_kv[i]:
                llama_cpp.llama_memory_seq_rm(self._mem, i, -1, -1)
                self.slot_kv[i] = []
        self._stats_due = True

    def _admit(self) -> None:
        while self.waiting:
            free = [i for i, s in enumerate(self.slots) if s is None]
            if not free:
                return
            self._place(self.waiting.popleft(), free)

    def _place(self, seq: Sequence, free: list[int]) -> None:
        """Give `seq` the free slot whose cache helps it most; else an empty one, so that no finished
        conversation's cache is evicted while cells lie unused; else the least recently used cache."""
        prompt, limit = seq.prompt, len(seq.prompt) - 1  # at least one token is evaluated: fresh logits
        # a cache is shared only within one cache_salt: another client's prefix is neither reused nor counted
        own = {i: common_prefix(self.slot_kv[i], prompt, limit) if self.slot_salt[i] == seq.salt else 0
               for i in free}

        def helps(i: int) -> int:  # a shared BOS, or a few tokens of a short prompt, is not worth a cache
            n = own[i]
            return n if n > 1 and (n >= MIN_SHARED_PREFIX or 2 * n >= len(prompt)) else 0

        slot = max(free, key=lambda i: (helps(i), not self.slot_kv[i], -self.slot_used_at[i]))
        prefix = own[slot]
        donors = [(common_prefix(kv, prompt, limit), i) for i, kv in enumerate(self.slot_kv)
                  if i != slot and self.slot_salt[i] == seq.salt]
        donor_len, donor = max(donors, default=(0, -1))
        mem = self._mem
        if donor_len >= max(prefix + 1, MIN_SHARED_PREFIX):
            llama_cpp.llama_memory_seq_rm(mem, slot, -1, -1)
            llama_cpp.llama_memory_seq_cp(mem, donor, slot, 0, donor_len)
            prefix = donor_len
        elif not llama_cpp.llama_memory_seq_rm(mem, slot, prefix, -1):
            llama_cpp.llama_memory_seq_rm(mem, slot, -1, -1)  # this cache cannot drop a tail: start over
            prefix = 0
        self.slot_kv[slot] = prompt[:prefix]
        self.slot_salt[slot] = seq.salt
        seq.slot, seq.n_cached, seq.n_prefilled, seq.t_admit = slot, prefix, prefix, time.monotonic()
        self.slots[slot] = seq
        self._stats_due = True

    def _finish(self, seq: Sequence, reason: str | None = None) -> None:
        if reason is not None:
            seq.finish = reason
        if seq.slot >= 0 and self.slots[seq.slot] is seq:
            self.slots[seq.slot] = None
            self.slot_used_at[seq.slot] = time.monotonic()
            if seq.finish in ("cancelled", "error"):  # nothing worth keeping: free the cells now
                llama_cpp.llama_memory_seq_rm(self._mem, seq.slot, -1, -1)
                self.slot_kv[seq.slot] = []
        self.by_id.pop(seq.request_id, None)
        self._stats_due = True
        if seq.finish != "error":
            send(P.Done(seq.request_id, "".join(seq.text_parts), seq.finish or "stop", seq.timings()))

    def _drop_all(self, message: str) -> None:
        for rid in list(self.tokenizing):
            send(P.Error(rid, "generation_failed", message))
        self.tokenizing.clear()
        self.cancelled_early.clear()
        for seq in list(self.by_id.values()):
            if seq.slot < 0 and seq in self.waiting:
                self.waiting.remove(seq)
            self._finish(seq, "error")
            send(P.Error(seq.request_id, "generation_failed", message))
