"""Memory pre-flight before a model load: refuse, in one line, a context that cannot fit this machine's
memory and name the largest one that does, instead of letting llama.cpp try to allocate it (and fail
with an allocation error that blames the model, or push the machine into swap).

"Cannot fit" is measured against memory that is free now, without the recommender's headroom: the point
here is to stop the impossible, not to second-guess a user who asks for a tight fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Limits:
    ram: int  # bytes free for the CPU side
    vram: int | None  # bytes free on the GPU, None: no usable GPU


def machine_limits() -> Limits:
    from app.core.predict.hardware import probe_hardware

    hw = probe_hardware()
    ram = hw.ram_available if hw.ram_available is not None else (hw.ram_total or 0)
    gpu = hw.best_gpu if hw.gpu_offload else None
    vram = None if gpu is None else (gpu.memory_free if gpu.memory_free is not None else gpu.memory_total)
    return Limits(ram=ram, vram=vram)


def check_context_fits(model: Path, n_ctx: int, type_k: str = "f16", type_v: str = "f16", n_gpu_layers: int = 0,
                       hint: str = "--ctx {n}", limits: Limits | None = None) -> str | None:
    """None when loading `model` with `n_ctx` fits in memory, else the one-line reason and the largest
    context that does fit. A file the GGUF reader cannot parse passes: the engine reports that better."""
    from app.core.gguf.info import GGUFError, inspect_gguf
    from app.core.metrics.phase import fmt_bytes
    from app.core.predict.memory import CTX_PAD, MemoryConfig, estimate_memory

    try:
        info = inspect_gguf(model)
    except (GGUFError, OSError, ValueError):
        return None
    limits = limits or machine_limits()
    if not limits.ram:
        return None  # memory unknown on this platform: nothing to compare with
    has_gpu = limits.vram is not None and n_gpu_layers != 0

    def fits(ctx: int) -> tuple[bool, int]:
        try:
            est = estimate_memory(info, MemoryConfig(n_ctx=ctx, type_k=type_k, type_v=type_v,
                                                     n_gpu_layers=n_gpu_layers), has_gpu=has_gpu)
        except ValueError:
            return True, 0  # a combination the estimator does not model: let llama.cpp decide
        ok = est.cpu.total <= limits.ram and (not has_gpu or est.gpu.total <= (limits.vram or 0))
        return ok, est.total

    ok, need = fits(n_ctx)
    if ok:
        return None
    lo, hi = 0, max(n_ctx // CTX_PAD, 1)
    while lo < hi:  # largest k with fits(k * 256): memory grows with the context
        mid = (lo + hi + 1) // 2
        if fits(mid * CTX_PAD)[0]:
            lo = mid
        else:
            hi = mid - 1
    where = f"{fmt_bytes(limits.ram)} of RAM" + (f" and {fmt_bytes(limits.vram or 0)} of GPU memory" if has_gpu
                                                else "")
    head = f"a {n_ctx}-token context does not fit: {model.name} would need ~{fmt_bytes(need)}, {where} is free"
    if lo == 0:
        return f"{head}; not even a {CTX_PAD}-token context fits"
    return f"{head}; the largest context that fits is {lo * CTX_PAD} ({hint.format(n=lo * CTX_PAD)})"
