"""What happens when a reply does not fit the context: LM Studio's three policies.

- `stop`: the prompt must fit (a chat first leaves out its oldest turns, as before); the reply ends when the
  context is full, with finish reason `context_full`.
- `truncate-middle`: a prompt too long for the context loses its middle before prefill (the first `n_keep`
  tokens and the newest ones stay); the reply then ends at the limit as with `stop`.
- `rolling`: the prompt is fitted like `truncate-middle`, and when the context fills up during the reply the
  oldest tokens after the first `n_keep` are dropped from the KV cache and the rest are shifted down
  (llama.cpp's llama_memory_seq_rm + llama_memory_seq_add, what llama-cli's context shift does): no
  re-prefill, and the reply goes on past the context size. A cache that cannot shift (some recurrent or
  M-RoPE models) falls back to evaluating the kept tokens again, and says so in the metrics.

`n_keep` defaults to the system prompt and first user turn of a chat, and to the prompt of a raw
continuation, capped at half the context either way (something must be left to roll). Imported only by the
engine worker.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import llama_cpp

from app.core.chat.saved_kv import common_prefix
from app.core.chat.templates import ChatTemplate, render
from app.core.config.defaults import CONTEXT_OVERFLOW_POLICIES
from app.core.sampling.chain import Sampler
from app.engine import protocol as P
from app.engine.llama.decoding import forget_prefill, logits_row, prefill


def middle_cut(tokens: Sequence[int], limit: int, n_keep: int) -> tuple[list[int], int]:
    """`tokens` shortened to `limit` by dropping tokens right after the first `n_keep`; returns
    (tokens, number dropped). The newest tokens, which the reply continues from, always stay."""
    if len(tokens) <= limit:
        return list(tokens), 0
    keep = max(0, min(n_keep, limit // 2))
    drop = len(tokens) - limit
    return [*tokens[:keep], *tokens[keep + drop:]], drop


def context_limit(llm: Any) -> int:
    """Tokens the context really holds for this `Llama`: llama.cpp pads a small n_ctx (128 -> 256 cells) but
    llama-cpp-python sizes its token bookkeeping (`input_ids`) by the n_ctx asked for; the smaller wins."""
    return int(min(llm.n_ctx(), llm.input_ids.shape[0]))


def shift_amount(n_past: int, n_keep: int) -> int:
    """Tokens to drop when the context is full: half of what is not kept (llama-cli's choice): one shift
    makes room for many tokens, and half the recent text stays for the model to continue from."""
    return max(1, (n_past - n_keep) // 2)


@dataclass
class ContextOverflow:
    """The policy of one request and what it did (the metrics say when, and how many tokens it dropped)."""

    policy: str = "stop"
    n_keep: int = 0
    limit: int = 0  # context_limit() of the model this ran on
    prompt_dropped: int = 0  # tokens cut from the middle of the prompt before prefill
    shifts: list[dict[str, int]] = field(default_factory=list)  # one per context shift during the reply
    reprefilled: int = 0  # tokens evaluated again because the cache could not shift

    @property
    def rolling(self) -> bool:
        return self.policy == "rolling"

    def max_tokens(self, requested: int, n_prompt: int) -> int:
        """How many tokens the reply may have: the request's own limit, or where the context is full."""
        return requested if self.rolling else max(0, min(requested, self.limit - n_prompt))

    def metrics(self) -> dict[str, Any]:
        return {"context_overflow": self.policy, "context_keep": self.n_keep,
                "context_prompt_dropped": self.prompt_dropped, "context_shifts": len(self.shifts),
                "context_dropped": sum(s["dropped"] for s in self.shifts),
                "context_shift_at": [s["at_token"] for s in self.shifts],
                "context_reprefilled": self.reprefilled,
                "context_limit": self.limit}  # what the prompt had to fit (app.core.chat.left_out says it)

    def tokens(self, llm: Any, prompt: Sequence[int], sampler: Sampler) -> Generator[int, None, None]:
        """Like decoding.plain_tokens, with a context shift instead of an end when the cache is full."""
        row = prefill(llm, prompt)
        ctx, batch = llm._ctx, llm._batch
        generated = 0
        while True:
            token = sampler.sample(row)
            generated += 1
            yield token
            if llm.n_tokens >= self.limit:
                self._shift(llm, generated)
            n = llm.n_tokens
            batch.set_batch(batch=[token], n_past=n, logits_all=False)
            ctx.decode(batch)  # raises on failure
            llm.input_ids[n] = token
            llm.n_tokens = n + 1
            row = logits_row(llm)

    def _shift(self, llm: Any, generated: int) -> None:
        forget_prefill(llm)  # the cells move or are rebuilt: the kept prefill no longer describes them
        n_past = llm.n_tokens
        keep = min(self.n_keep, n_past // 2)
        drop = shift_amount(n_past, keep)
        mem = llama_cpp.llama_get_memory(llm._ctx.ctx)
        ids = llm.input_ids
        if llama_cpp.llama_memory_can_shift(mem) and llama_cpp.llama_memory_seq_rm(mem, 0, keep, keep + drop):
            llama_cpp.llama_memory_seq_add(mem, 0, keep + drop, n_past, -drop)
            ids[keep:n_past - drop] = ids[keep + drop:n_past].copy()
            llm.n_tokens = n_past - drop
        else:
            kept = [*ids[:keep].tolist(), *ids[keep + drop:n_past].tolist()]
            llm.reset()
            llm.eval(kept)
            self.reprefilled += len(kept)
        self.shifts.append({"at_token": generated, "dropped": drop})


def fit_prompt(llm: Any, req: P.Generate, tokens: list[int],
               template: ChatTemplate | None) -> tuple[list[int], ContextOverflow]:
    """The request's policy, with its `n_keep`, and the prompt cut to leave room for the reply (as much as
    the chat path leaves: the reply's limit, at most half the context), only under truncate-middle and
    rolling; `stop` keeps the prompt as it is."""
    policy = req.context_overflow
    if policy not in CONTEXT_OVERFLOW_POLICIES:
        raise ValueError(f"Unknown context overflow policy {policy!r}; "
                         f"use one of {', '.join(CONTEXT_OVERFLOW_POLICIES)}")
    n_ctx = context_limit(llm)
    reserve = max(1, min(req.sampling.max_tokens, n_ctx // 2))
    if req.n_keep is not None and req.n_keep >= 0:
        n_keep = req.n_keep
    elif req.messages is not None and template is not None:
        n_keep = _head_tokens(llm, req.messages, template, tokens)
    else:
        n_keep = len(tokens)
    plan = ContextOverflow(policy, min(n_keep, n_ctx // 2), n_ctx)
    if policy != "stop":
        tokens, plan.prompt_dropped = middle_cut(tokens, max(1, n_ctx - reserve), plan.n_keep)
    elif len(tokens) >= n_ctx:
        raise ValueError(f"The prompt is {len(tokens)} tokens but the context holds {n_ctx}. Shorten it, load "
                         "the model with a larger context, or let it overflow (truncate-middle, rolling).")
    return tokens, plan


def _head_tokens(llm: Any, messages: list[dict[str, str]], template: ChatTemplate, tokens: list[int]) -> int:
    """Tokens of the prompt up to the end of the first user turn (with the system prompt before it): the
    common start of the whole prompt and of the prompt for just those messages."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
    eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
    text = render(template, messages[:first_user + 1], bos_token=bos, eos_token=eos)
    add_bos = llm._model.add_bos_token() and not (bos and text.startswith(bos))
    head = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
    return common_prefix(list(head), list(tokens))
