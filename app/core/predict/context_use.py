"""Context sized from use: when a model's chats never came near the chosen context, say how far they went and
what a smaller context would free ("your chats with this model reached 3.1k tokens; 8k would free 1.1 GiB").

Only the user's own chat store counts (`app.core.chat.model_usage`); the memory figures are the memory
model's (`estimate_memory`), for the same load with only the context changed. Nothing is said after too few
replies to know the use, when the suggested context is not smaller, or when it would free too little to
matter.
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
    freed_bytes: int  # RAM + GPU memory the suggested context frees

    @property
    def line(self) -> str:
        return (f"your chats with this model reached {fmt_tokens(self.reached)} tokens; "
                f"{fmt_tokens(self.suggested)} would free {fmt_bytes(self.freed_bytes)}")


def suggested_context(reached: int) -> int:
    """The smallest power of two with room above `reached` (at least MIN_CONTEXT)."""
    want = max(MIN_CONTEXT, int(reached * HEADROOM))
    return 1 << (want - 1).bit_length()


def context_advice(info: GGUFInfo, cfg: MemoryConfig, reached: int, replies: int,
                   has_gpu: bool = True) -> ContextAdvice | None:
    """Advice for a load of `info` with `cfg`, from use that reached `reached` tokens in `replies` replies;
    None when there is nothing worth saying."""
    chosen = cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train
    if replies < MIN_REPLIES or chosen <= 0:
        return None
    suggested = suggested_context(reached)
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
