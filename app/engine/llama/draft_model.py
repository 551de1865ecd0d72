"""Speculative decoding with a small draft model that shares the main model's vocabulary.

The draft model proposes a few tokens greedily; the main model checks them in one batch (the verification,
acceptance and KV trimming are PromptLookup's, app.engine.llama.prompt_lookup), so with greedy sampling the output
is what the main model alone would write; only the number of main-model calls changes, token for token: at a
near-tie the cells a batch wrote are recomputed one token at a time first (PromptLookup._decide_alone says why).

Drafted token ids are only meaningful when both models number their tokens the same way, so a draft is
accepted only when the GGUF headers agree (app.core.gguf.vocabulary, which says why not in words).

Imported only by the engine worker.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import llama_cpp

from app.core.gguf.vocabulary import Vocabulary, draft_problem, read_vocabulary, vocab_mismatch  # noqa: F401
from app.core.sampling.chain import Sampler
from app.engine.llama.decoding import logits_row, reuse_prefix
from app.engine.llama.prompt_lookup import PromptLookup
from app.engine.llama.worker.llama_templates import templates_left_to_the_app


class DraftModel:
    """A loaded draft model that proposes the next tokens greedily for a given history."""

    def __init__(self, llm: Any, max_draft: int) -> None:
        self.llm = llm
        self.max_draft = max(1, max_draft)
        self.seconds = 0.0  # time spent drafting (part of the cost of speculation)

    @classmethod
    def load(cls, path: str, n_ctx: int, n_threads: int, n_threads_batch: int, max_draft: int) -> DraftModel:
        with templates_left_to_the_app():  # a draft's chat templates are never rendered at all
            llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads_batch,
                                  n_gpu_layers=0, verbose=False)
        return cls(llm, max_draft)

    def close(self) -> None:
        self.llm.close()

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        """Up to `k` greedy tokens after `history` (its cached prefix is reused: only new tokens are fed)."""
        llm = self.llm
        k = min(k, self.max_draft, llm.n_ctx() - len(history) - 1, llm.input_ids.shape[0] - len(history) - 1)
        if k <= 0:
            return []
        t0 = time.perf_counter()
        prefix = reuse_prefix(llm, history)
        llm.eval(list(history[prefix:]))
        out: list[int] = []
        while True:
            token = int(logits_row(llm).argmax())
            out.append(token)
            if len(out) >= k or llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                break
            llm.eval([token])
        self.seconds += time.perf_counter() - t0
        return out


class DraftModelLookup(PromptLookup):
    """PromptLookup's verification with drafts from a draft model instead of from the text so far."""

    drafter = "draft model"

    def __init__(self, llm: Any, sampler: Sampler, draft: DraftModel, plain_ms_hint: float | None = None) -> None:
        super().__init__(llm, sampler, max_draft=draft.max_draft, plain_ms_hint=plain_ms_hint)
        self.draft_model = draft

    def draft(self, history: list[int], k: int) -> list[int]:
        t0 = time.perf_counter()
        tokens = self.draft_model.propose(history, k)
        self.batch_s += time.perf_counter() - t0  # drafting is part of what a verified batch costs
        return tokens


def open_draft(main_path: str, draft_path: str, main_llm: Any, max_draft: int) -> tuple[DraftModel | None, str | None]:
    """The draft model for `main_llm`, or (None, the reason in words) when it cannot serve as one."""
    problem = draft_problem(main_path, draft_path)
    if problem:
        return None, problem
    params = main_llm.context_params
    try:
        return DraftModel.load(draft_path, main_llm.n_ctx(), params.n_threads, params.n_threads_batch,
                               max_draft), None
    except Exception as exc:  # noqa: BLE001 - llama.cpp reports a bad file as a generic failure
        return None, f"llama.cpp could not load the draft model: {exc}"
