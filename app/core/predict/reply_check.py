"""One reply against the speed model: what its prefill and decode should have run at on this machine for this
load (the prompt it evaluated after the tokens it reused, the tokens it wrote from the depth it started at),
and, when it ran well under that, the "why is it slow?" line (`app.core.metrics.slowness`).

The window's dashboard and `roofline chat` both call `slow_reply_line` with the reply's Done.metrics (the
engine put its evidence there, `app.core.metrics.evidence`), the model's header, the machine's rates and the
load's memory config.
"""

from __future__ import annotations

from typing import Any

from app.core.gguf.facts import GGUFInfo
from app.core.metrics.evidence import Evidence
from app.core.metrics.phase import PhaseMetrics
from app.core.metrics.slowness import reply_slow_line
from app.core.predict.memory import MemoryConfig
from app.core.predict.speed import Rates, predict

MIN_DECODE_TOKENS = 8  # a shorter reply's rate is mostly its first steps' warm-up
MIN_PREFILL_TOKENS = 32


def expected(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, m: PhaseMetrics) -> tuple[float, float]:
    """(decode tok/s, prefill tok/s) the speed model predicts for this reply; 0 for a phase too short to
    judge."""
    decode = prefill = 0.0
    if m.decode_tokens >= MIN_DECODE_TOKENS:
        decode = predict(info, rates, cfg, depth=m.prompt_tokens, n_prompt=0, n_gen=m.decode_tokens).decode_tps
    if m.prefill_tokens >= MIN_PREFILL_TOKENS:
        prior = max(m.prompt_tokens - m.prefill_tokens, 0)
        prefill = predict(info, rates, cfg, depth=prior, n_prompt=m.prefill_tokens, n_gen=1).prefill_tps
    return decode, prefill


def slow_reply_line(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, metrics: dict[str, Any]) -> str:
    """The one line for a reply measured well under its prediction ("" when it was not, or is too short to
    judge, or its numbers are not llama.cpp's own)."""
    m = PhaseMetrics.from_dict(metrics)
    if m.source != PhaseMetrics.source or m.draft_tokens:  # a remote server's or a drafted reply: not comparable
        return ""
    decode, prefill = expected(info, rates, cfg, m)
    raw = metrics.get("evidence")
    ev = Evidence.from_dict(raw) if isinstance(raw, dict) else None
    return reply_slow_line(m.decode_tps if decode else 0.0, decode, m.prefill_tps if prefill else 0.0, prefill, ev)


def for_load(model_path: str, n_ctx: int, type_k: str = "f16", type_v: str = "f16", flash_attn: bool | None = None,
             n_gpu_layers: int = 0, swa_full: bool = True, n_threads: int | None = None
             ) -> tuple[GGUFInfo, Rates, MemoryConfig]:
    """(header, this machine's stored rates for the load's threads, memory config) of a load as the engine
    reported it, to judge its replies with `slow_reply_line` (reads the header: off a GUI thread)."""
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.context_view import stored_machine_rates

    info = inspect_gguf(model_path)
    rates = stored_machine_rates(n_threads or None)
    cfg = MemoryConfig(n_ctx=n_ctx, type_k=type_k, type_v=type_v, flash_attn=flash_attn,
                       n_gpu_layers=n_gpu_layers if rates.gpu is not None else 0, swa_full=swa_full)
    return info, rates, cfg
