"""Context sized from use: when a model's chats never came near the chosen context, say how far they went and
what a smaller context would free ("your chats with this model reached 3.1k tokens; 8k would free 1.1 GiB");
when they went past it, that it would cut them ("your chats with this model reached 388 tokens: 256 would cut
them"). And a context above what the model was trained for is said to be so (`beyond_trained`).

Only the user's own chat store counts (`app.core.chat.model_usage`); the memory figures are the memory
model's (`estimate_memory`), for the same load with only the context changed. Nothing is said after too few
replies to know the use, when the suggested context is not smaller, or when it would free too little to
matter; a chat longer than the chosen context is always worth a warning (one reply is enough to know it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.core.gguf.facts import GGUFInfo
from app.core.metrics.phase import fmt_bytes
from app.core.predict.depth import fmt_tokens
from app.core.predict.memory import MemoryConfig, estimate_memory

MIN_REPLIES = 3  # fewer replies say little of how the model is used
HEADROOM = 1.25  # room above the longest chat so far
MIN_CONTEXT = 2048
MIN_FREED = 128 * 2**20  # less is not worth a setting change


@dataclass(frozen=True)
class ContextAdvice:
    reached: int  # the most tokens a chat held
    chosen: int
    suggested: int
    freed_bytes: int  # RAM + GPU memory the suggested context frees (0 when the chosen context cuts chats)

    @property
    def cuts(self) -> bool:
        return self.reached > self.chosen

    @property
    def line(self) -> str:
        reached = f"your chats with this model reached {fmt_tokens(self.reached)} tokens"
        if self.cuts:
            return f"{reached}: {fmt_tokens(self.chosen)} would cut them"
        return f"{reached}; {fmt_tokens(self.suggested)} would free {fmt_bytes(self.freed_bytes)}"


def beyond_trained(n_ctx: int, n_ctx_train: int) -> str:
    """"65,536 is above what the model was trained for (32,768): replies past that degrade" ("" when not)."""
    if not n_ctx_train or n_ctx <= n_ctx_train:
        return ""
    return f"{n_ctx:,} is above what the model was trained for ({n_ctx_train:,}): replies past that degrade"


def suggested_context(reached: int) -> int:
    """The smallest power of two with room above `reached` (at least MIN_CONTEXT)."""
    want = max(MIN_CONTEXT, int(reached * HEADROOM))
    return 1 << (want - 1).bit_length()


def context_advice(info: GGUFInfo, cfg: MemoryConfig, reached: int, replies: int,
                   has_gpu: bool = True) -> ContextAdvice | None:
    """Advice for a load of `info` with `cfg`, from use that reached `reached` tokens in `replies` replies;
    None when there is nothing worth saying."""
    chosen = cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train
    if chosen <= 0 or replies <= 0:
        return None
    suggested = suggested_context(reached)
    if reached > chosen:
        return ContextAdvice(reached, chosen, suggested, 0)
    if replies < MIN_REPLIES:
        return None
    if suggested >= chosen:
        return None
    try:
        now = estimate_memory(info, cfg, has_gpu=has_gpu)
        smaller = estimate_memory(info, replace(cfg, n_ctx=suggested), has_gpu=has_gpu)
    except ValueError:
        return None  # a configuration the memory model refuses: no advice rather than a wrong one
    freed = now.total - smaller.total
    if freed < MIN_FREED:
        return None
    return ContextAdvice(reached, chosen, suggested, freed)
