"""Which quantization, context and GPU offload to use on this machine, and why.

For every candidate (a GGUFInfo from a local file or a remote header, plus its download size) the
recommender finds where it fits — everything on the GPU, some layers on the GPU, CPU only, or not at
all — with the requested context, using `memory.estimate_memory` against a memory budget that
leaves headroom for the OS and other apps. It then reports the largest context that fits at each KV
cache type, the n_gpu_layers to use, predicted prefill/decode speed (`speed.predict`, labelled
calibrated or uncalibrated) and the quality cost (`quant_quality`), picks one and says why in one
plain sentence.

Choice rule: the best placement class wins (full GPU > partial > CPU only); within it, the
highest-quality variant that is still at least half as fast as the fastest one in that class (and at
least 5 tok/s when any is).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from app.core.gguf.info import GGUFInfo
from app.core.gguf.kv_types import KV_TYPES
from app.core.predict.hardware import GiB, GPUInfo, HardwareInfo, LlamaDevice
from app.core.predict.memory import CTX_PAD, MemoryConfig, MemoryEstimate, estimate_memory
from app.core.predict.quality import QuantQuality, quality
from app.core.predict.speed import Rates, SpeedPrediction, default_rates, offload_curve, predict

MIN_DECODE_TPS = 5.0
GPU_BACKEND_OVERHEAD = {"nvidia": 450 * 1024**2, "amd": 450 * 1024**2, "apple": 256 * 1024**2}

FULL, PARTIAL, CPU, NONE = "full GPU", "partial GPU", "CPU only", "does not fit"
UNSUPPORTED = "not a text model"  # e.g. a vision projector (mmproj) or a vocabulary-only file
_RANK = {FULL: 0, PARTIAL: 1, CPU: 2, NONE: 3, UNSUPPORTED: 4}


@dataclass
class Budget:
    """Memory the model may use, after headroom for the OS and other apps."""

    ram: int
    vram: int  # 0: no usable GPU
    unified: bool  # Apple: one pool; the GPU share is a limit inside it
    gpu: GPUInfo | None
    notes: list[str] = field(default_factory=list)


def memory_budget(hw: HardwareInfo, vram_limit: int | None = None) -> Budget:
    """What a load may use of RAM and of the best GPU llama.cpp offloads to. `vram_limit` (bytes; the
    `vram_budget_gib` setting) caps the GPU's share whatever the device has."""
    notes = []
    total = hw.ram_total or 8 * GiB
    available = hw.ram_available if hw.ram_available is not None else total
    headroom = max(2 * GiB, total // 5)
    ram = max(0, min(available, total - headroom))
    notes.append(f"leaves {headroom / GiB:.1f} GB of RAM for the OS and other apps"
                 + (" (and only uses what is free now)" if available < total - headroom else ""))
    gpu = hw.best_gpu
    vram = 0
    unified = False
    for hidden in hw.hidden_gpus:
        notes.append(f"{hidden.name} found, but this llama.cpp does not see it (a build without its backend, or "
                     "hidden by CUDA_VISIBLE_DEVICES / GGML_VK_VISIBLE_DEVICES)")
    if gpu is not None and hw.gpu_offload is False:
        notes.append(f"{gpu.name} found, but this llama.cpp build cannot offload to it (CPU-only build)")
        gpu = None
    elif gpu is not None and gpu.memory_total:
        unified = gpu.unified_memory and gpu.vendor == "apple"
        free = gpu.memory_free if gpu.memory_free is not None else gpu.memory_total
        gpu_headroom = max(512 * 1024**2, gpu.memory_total // 10)
        overhead = GPU_BACKEND_OVERHEAD.get(gpu.vendor, 450 * 1024**2)
        vram = max(0, min(free, gpu.memory_total - gpu_headroom) - overhead)
        notes.append(f"leaves {gpu_headroom / GiB:.1f} GB of GPU memory free and {overhead / 2**20:.0f} MB for "
                     "the GPU backend itself")
        if vram_limit is not None and vram_limit < vram:
            vram = vram_limit
            notes.append(f"plans for at most {vram_limit / GiB:.2f} GiB of GPU memory (the vram_budget_gib setting)")
    return Budget(ram=ram, vram=vram, unified=unified, gpu=gpu if vram else None, notes=notes)


@dataclass
class Candidate:
    info: GGUFInfo
    name: str = ""  # shown to the user; default: the file type
    size: int | None = None  # download/file size; default: the info's file size


@dataclass
class VariantReport:
    name: str
    file_type: str
    size: int
    verdict: str
    n_layers: int
    n_gpu_layers: int
    n_ctx: int
    max_ctx: dict[str, int]  # largest context that fits (same placement) per KV cache type
    prefill_tps: float
    decode_tps: float
    speed_label: str
    decode_bound: str
    quality: QuantQuality
    memory: MemoryEstimate | None
    speed: SpeedPrediction | None
    curve: list[tuple[int, float]] = field(default_factory=list)  # (n_gpu_layers, decode tok/s)
    recommended: bool = False
    n_cpu_moe: int = 0  # a mixture of experts: blocks whose experts stay in RAM (llama.cpp's --n-cpu-moe)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["quality"]["text"] = self.quality.describe()
        if self.memory is not None:
            data["memory"] = self.memory.to_dict()
            data["kv_bytes"] = self.memory.kv_bytes
            data["bytes_cpu"] = self.memory.cpu.total
            data["bytes_gpu"] = self.memory.gpu.total
        return data


@dataclass
class Recommendation:
    variants: list[VariantReport]
    pick: VariantReport | None
    sentence: str
    budget: Budget
    n_ctx: int
    kv_type: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "pick": self.pick.name if self.pick else None,
            "sentence": self.sentence,
            "n_ctx": self.n_ctx,
            "kv_type": self.kv_type,
            "budget": {"ram": self.budget.ram, "vram": self.budget.vram, "unified": self.budget.unified,
                       "gpu": self.budget.gpu.name if self.budget.gpu else None, "notes": self.budget.notes},
            "variants": [v.to_dict() for v in self.variants],
        }


@dataclass
class Machine:
    hw: HardwareInfo
    rates: Rates
    vram_limit: int | None = None  # bytes: the vram_budget_gib setting

    @classmethod
    def from_system(cls, remeasure: bool = False, gpu_offload: bool | None = None, threads: int | None = None,
                    batch_threads: int | None = None, llama_devices: list[LlamaDevice] | None = None) -> Machine:
        """This computer: probed hardware (with the devices llama.cpp sees, when the caller asked the engine),
        cached (or fresh) bandwidth, the stored calibration for the threads a load uses (None: llama.cpp's
        default) applied, and the settings' cap on GPU memory."""
        from app.core.predict.bandwidth import get_bandwidth
        from app.core.predict.calibration import calibrated_rates
        from app.core.predict.hardware import probe_hardware

        hw = probe_hardware(gpu_offload=gpu_offload, llama_devices=llama_devices)
        bw = get_bandwidth(hw.machine_key, remeasure=remeasure)
        rates = default_rates(hw, bw, threads=threads, batch_threads=batch_threads)
        return cls(hw, calibrated_rates(rates, hw.machine_key, "cpu", "gpu"), vram_limit_from_settings())


def vram_limit_from_settings() -> int | None:
    """The `vram_budget_gib` setting (or ROOFLINE_VRAM_BUDGET_GIB) in bytes; None when not set."""
    from app.core.config.settings import load_settings

    gib = load_settings(move_aside=False).settings.vram_budget_gib
    return int(gib * GiB) if gib is not None else None


# ------------------------------------------------------------------------------------------ placement


def _fits(est: MemoryEstimate, budget: Budget) -> bool:
    if budget.unified:  # one pool: everything must fit the GPU's share, and the pool itself
        return est.total <= budget.vram and est.total <= budget.ram
    return est.cpu.total <= budget.ram and est.gpu.total <= budget.vram


def _config(info: GGUFInfo, n_ctx: int, kv_type: str, ngl: int, n_cpu_moe: int = 0,
            gpu: GPUInfo | None = None) -> MemoryConfig:
    # flash attention as the engine sets it: needed (and on) for a quantized V cache, else off; the GPU's facts
    # (its backend, its largest matrix) where llama.cpp reported them
    return MemoryConfig(n_ctx=n_ctx, type_k=kv_type, type_v=kv_type, n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe,
                        gpu_present=gpu is not None and bool(gpu.backend), gpu_max_matrix=gpu.max_matrix_bytes if gpu
                        else 0, gpu_backend=gpu.backend.lower() if gpu else "")


def experts_in_ram(info: GGUFInfo, n_ctx: int, kv_type: str, budget: Budget) -> MemoryEstimate | None:
    """A mixture of experts that does not fit the GPU whole: every layer offloaded but the expert matrices of
    the fewest first blocks kept in RAM (llama.cpp's --n-cpu-moe), None when even all experts in RAM leave too
    much for the GPU. Preferred over offloading fewer layers, as llama.cpp's own fitting does: attention and the
    shared weights run on the GPU for every token, while a token reads only its chosen experts from RAM."""
    if not info.is_moe:
        return None

    def est(n: int) -> MemoryEstimate:
        return estimate_memory(info, _config(info, n_ctx, kv_type, -1, n, budget.gpu))

    if not _fits(est(info.n_layers), budget):
        return None
    lo, hi = 1, info.n_layers  # smallest n that fits; GPU memory falls as n grows
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(est(mid), budget):
            hi = mid
        else:
            lo = mid + 1
    return est(lo)


def place(info: GGUFInfo, n_ctx: int, kv_type: str, budget: Budget) -> tuple[str, int, MemoryEstimate]:
    """(verdict, n_gpu_layers, estimate) for running `info` with `n_ctx` context; a partial placement of a
    mixture of experts may keep experts in RAM instead (the estimate's `n_cpu_moe`)."""
    has_gpu = budget.gpu is not None and budget.vram > 0
    if has_gpu:
        full = estimate_memory(info, _config(info, n_ctx, kv_type, -1, gpu=budget.gpu))
        if _fits(full, budget):
            return FULL, info.n_layers + 1, full
        if not budget.unified and (moe := experts_in_ram(info, n_ctx, kv_type, budget)) is not None:
            return PARTIAL, info.n_layers + 1, moe
        if not budget.unified:
            for ngl in range(info.n_layers, 0, -1):  # most layers on the GPU that still fit
                est = estimate_memory(info, _config(info, n_ctx, kv_type, ngl, gpu=budget.gpu))
                if est.gpu.total <= budget.vram:
                    if est.cpu.total <= budget.ram:
                        return PARTIAL, ngl, est
                    break
    cpu = estimate_memory(info, _config(info, n_ctx, kv_type, 0), has_gpu=False)
    if _fits(cpu, Budget(budget.ram, 0, False, None)):
        return CPU, 0, cpu
    return NONE, 0, cpu


def max_context(info: GGUFInfo, kv_type: str, ngl: int, budget: Budget, n_cpu_moe: int = 0) -> int:
    """Largest context (multiple of 256, up to the trained context) that fits with this placement."""
    limit = info.n_ctx_train or 131072
    has_gpu = budget.gpu is not None and budget.vram > 0 and ngl != 0

    def ok(n: int) -> bool:
        est = estimate_memory(info, _config(info, n, kv_type, ngl, n_cpu_moe, budget.gpu if has_gpu else None),
                              has_gpu=has_gpu)
        return _fits(est, budget) if has_gpu else _fits(est, Budget(budget.ram, 0, False, None))

    lo, hi = 0, limit // CTX_PAD
    if not ok(CTX_PAD):
        return 0
    while lo < hi:  # largest k with ok(k * 256); memory grows with context, so this is monotone
        mid = (lo + hi + 1) // 2
        if ok(mid * CTX_PAD):
            lo = mid
        else:
            hi = mid - 1
    return min(lo * CTX_PAD, limit)


# ------------------------------------------------------------------------------------------ recommend


def assess(cand: Candidate, machine: Machine, n_ctx: int, kv_type: str, budget: Budget) -> VariantReport:
    info = cand.info
    ctx = min(n_ctx, info.n_ctx_train) if info.n_ctx_train else n_ctx
    if info.n_layers == 0 or info.n_vocab == 0:
        return VariantReport(
            name=cand.name or info.file_type or info.name, file_type=info.file_type,
            size=cand.size if cand.size is not None else (info.file_size or info.tensor_bytes),
            verdict=UNSUPPORTED, n_layers=0, n_gpu_layers=0, n_ctx=0, max_ctx={t: 0 for t in KV_TYPES},
            prefill_tps=0.0, decode_tps=0.0, speed_label="", decode_bound="", quality=quality(info.file_type),
            memory=None, speed=None,
        )
    verdict, ngl, est = place(info, ctx, kv_type, budget)
    rates = machine.rates if budget.gpu is not None else Rates(machine.rates.cpu, None)
    cfg = _config(info, ctx, kv_type, ngl, est.n_cpu_moe, budget.gpu if ngl else None)
    speed = predict(info, rates, cfg, depth=0, n_prompt=512, n_gen=128) if verdict != NONE else None
    max_ctx = {t: (max_context(info, t, ngl, budget, est.n_cpu_moe) if verdict != NONE else 0) for t in KV_TYPES}
    curve = offload_curve(info, rates, _config(info, ctx, kv_type, 0)) if rates.gpu is not None else []
    return VariantReport(
        name=cand.name or info.file_type or info.name,
        file_type=info.file_type,
        size=cand.size if cand.size is not None else (info.file_size or info.tensor_bytes),
        verdict=verdict, n_layers=info.n_layers, n_gpu_layers=ngl, n_ctx=ctx, max_ctx=max_ctx,
        n_cpu_moe=est.n_cpu_moe,
        prefill_tps=speed.prefill_tps if speed else 0.0,
        decode_tps=speed.decode_tps if speed else 0.0,
        speed_label=speed.label if speed else "",
        decode_bound=speed.decode_bound if speed else "",
        quality=quality(info.file_type), memory=est, speed=speed, curve=curve,
    )


def choose(reports: list[VariantReport]) -> VariantReport | None:
    fitting = [r for r in reports if r.verdict not in (NONE, UNSUPPORTED)]
    if not fitting:
        return None
    best_class = min(_RANK[r.verdict] for r in fitting)
    group = [r for r in fitting if _RANK[r.verdict] == best_class]
    fastest = max(r.decode_tps for r in group)
    # "Fast enough": at least half the fastest variant's speed, and MIN_DECODE_TPS where that is within
    # reach. When even the fastest is slow, demanding all of its speed would always pick the worst
    # quality (Q2_K), so the floor relaxes to 80 % of it.
    floor = max(0.5 * fastest, min(MIN_DECODE_TPS, 0.8 * fastest))
    fast_enough = [r for r in group if r.decode_tps >= floor]
    return min(fast_enough, key=lambda r: (r.quality.kld if r.quality.kld is not None else 9.0, -r.decode_tps))


def _ctx_text(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def explain(pick: VariantReport | None, budget: Budget, n_ctx: int) -> str:
    if pick is None:
        return (f"None of these fits in memory with {_ctx_text(n_ctx)} context (after headroom for the OS): "
                "try a smaller quantization or a shorter context.")
    speed = f"decode ≈ {pick.decode_tps:.0f} tok/s ({pick.speed_label})"
    why = {"memory bandwidth": "limited by memory bandwidth", "compute": "limited by the CPU's arithmetic"}.get(
        pick.decode_bound, "limited by per-token overhead")
    ctx = _ctx_text(pick.n_ctx)
    if pick.verdict == FULL and budget.gpu is not None:
        mem = budget.gpu.memory_total or 0
        where = f"your {mem / GiB:.0f} GB GPU" if not budget.unified else f"your Mac's {mem / GiB:.0f} GB GPU share"
        return f"{pick.name}: fits in {where} with {ctx} context; {speed}, {why}."
    if pick.verdict == PARTIAL and budget.gpu is not None and pick.n_cpu_moe:
        return (f"{pick.name}: every layer on your {(budget.gpu.memory_total or 0) / GiB:.0f} GB GPU but the "
                f"experts of the first {pick.n_cpu_moe} of {pick.n_layers} blocks, which stay in RAM "
                f"(--n-cpu-moe {pick.n_cpu_moe}), with {ctx} context; {speed}, {why} of the part in RAM.")
    if pick.verdict == PARTIAL and budget.gpu is not None:
        n = pick.memory.layers_on_gpu if pick.memory else pick.n_gpu_layers
        return (f"{pick.name}: {n} of {pick.n_layers} layers fit on your "
                f"{(budget.gpu.memory_total or 0) / GiB:.0f} GB GPU "
                f"and the rest run from RAM, with {ctx} context; {speed}, {why} of the part in RAM.")
    return f"{pick.name}: runs from RAM on the CPU with {ctx} context; {speed}, {why}."


def recommend(candidates: list[Candidate] | list[GGUFInfo], machine: Machine, n_ctx: int | None = None,
              kv_type: str = "f16") -> Recommendation:
    """Assess every candidate on `machine` and pick one. n_ctx None: 8k (or the trained context if less)."""
    if kv_type not in KV_TYPES:
        raise ValueError(f"kv_type must be one of {', '.join(KV_TYPES)}")
    cands = [c if isinstance(c, Candidate) else Candidate(c) for c in candidates]
    want = n_ctx or 8192
    budget = memory_budget(machine.hw, machine.vram_limit)
    reports = [assess(c, machine, want, kv_type, budget) for c in cands]
    pick = choose(reports)
    if pick is not None:
        pick.recommended = True
    sentence = explain(pick, budget, want)
    if pick is None and reports and all(r.verdict == UNSUPPORTED for r in reports):
        sentence = "None of these files is a text model (a vision projector or vocabulary file?): nothing to run."
    return Recommendation(reports, pick, sentence, budget, want, kv_type)


def decode_at_offload(info: GGUFInfo, machine: Machine, n_ctx: int) -> Callable[[int], float]:
    """The speed model's decode tok/s for `info` at a given n_gpu_layers on this machine's GPU (the one llama.cpp
    uses, with its facts), for the offload sweep's predicted curve."""
    budget = memory_budget(machine.hw, machine.vram_limit)
    rates = machine.rates if budget.gpu is not None else Rates(machine.rates.cpu, None)

    def decode(ngl: int) -> float:
        cfg = _config(info, n_ctx, "f16", ngl, gpu=budget.gpu if ngl else None)
        return predict(info, rates, cfg, depth=0, n_prompt=0, n_gen=16).decode_tps

    return decode

