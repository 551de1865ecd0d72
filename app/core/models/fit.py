"""What each local model means on this machine: fit verdict, largest context per KV cache type, predicted
prefill and decode speed — the recommender's numbers for the Library, where users choose what to run.

`machine_for_library()` never measures anything (the Library lists on every refresh): it uses the cached
bandwidth probe and stored calibration when there are any, else the uncalibrated fallback rates, and the
speeds say which (`speed_label`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.config.defaults import DEFAULT_N_CTX
from app.core.gguf.kv_types import KV_TYPES
from app.core.predict.recommend import NONE, UNSUPPORTED, Candidate, Machine, recommend

LIBRARY_CTX = DEFAULT_N_CTX  # the context the verdict and speeds are for (the chat's default)


@dataclass
class LibraryFit:
    verdict: str  # "full GPU" | "partial GPU" | "CPU only" | "does not fit" | "not a text model"
    n_gpu_layers: int
    max_ctx: dict[str, int]  # KV type -> largest context that fits with this placement
    prefill_tps: float
    decode_tps: float
    speed_label: str  # "calibrated" | "uncalibrated"
    decode_bound: str
    sentence: str  # the recommender's one-sentence why

    @property
    def runs(self) -> bool:
        return self.verdict not in (NONE, UNSUPPORTED)

    def ctx_text(self) -> str:
        return " / ".join(_k(self.max_ctx.get(t, 0)) for t in KV_TYPES)

    def speed_text(self) -> str:
        return f"{_rate(self.prefill_tps)} / {_rate(self.decode_tps)}" if self.runs else "—"


def _k(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 else str(n)


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def machine_for_library(model_path: str | None = None) -> Machine:
    """This computer from cached facts only: probed hardware, the cached bandwidth probe (or none), the stored
    calibration — for the threads a load of `model_path` would use (settings, its preset and tune result;
    no path: the settings alone)."""
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.load_plan import planned_threads
    from app.core.predict.machine_roofs import machine_figures

    hw = probe_hardware()
    threads, batch = planned_threads(model_path)
    rates, _ = machine_figures(threads, batch, measure=False, gpu_backend="gpu", hw=hw)
    return Machine(hw, rates)


def assess_models(models: list[Any], machine: Machine, n_ctx: int = LIBRARY_CTX) -> dict[str, LibraryFit]:
    """path -> LibraryFit for every usable model (`library.LocalModel`s with their parsed `info`)."""
    out: dict[str, LibraryFit] = {}
    for m in models:
        if m.broken or m.info is None:
            continue
        rec = recommend([Candidate(m.info, size=m.size)], machine, n_ctx=n_ctx)
        v = rec.variants[0]
        out[str(m.path)] = LibraryFit(v.verdict, v.n_gpu_layers, dict(v.max_ctx), v.prefill_tps, v.decode_tps,
                                      v.speed_label, v.decode_bound, rec.sentence)
    return out


def _same_model_key(info: Any) -> tuple[Any, ...]:
    """Files of one model in different quantizations share these (quantizing changes none of them)."""
    return (info.architecture, info.n_layers, info.n_embd, info.n_vocab, info.n_params // 10_000_000)


def selector_advice(infos: dict[str, Any], machine: Machine, n_ctx: int | None = None) -> dict[str, str]:
    """path -> one sentence for the model selector: which quantization (among the files of the same model
    here), context and KV cache type Roofline recommends, and why."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for path, info in infos.items():
        if info is not None and info.n_layers:
            groups.setdefault(_same_model_key(info), []).append(path)
    out: dict[str, str] = {}
    for paths in groups.values():
        cands = [Candidate(infos[p], name=infos[p].file_type or p.rsplit("/", 1)[-1]) for p in paths]
        rec = recommend(cands, machine, n_ctx=n_ctx)
        pick = rec.pick
        if pick is None:
            for p in paths:
                out[p] = rec.sentence
            continue
        picked = paths[rec.variants.index(pick)]
        kv = next((t for t in KV_TYPES if pick.max_ctx.get(t, 0) >= pick.n_ctx), "q4_0")
        how = f"{_k(pick.n_ctx)} context with a {kv} KV cache"
        for p in paths:
            if p == picked:
                others = f" (best of the {len(paths)} quantizations here)" if len(paths) > 1 else ""
                out[p] = f"Recommended: this file{others}, {how}. {rec.sentence}"
            else:
                out[p] = f"Roofline recommends {pick.name} ({picked.rsplit('/', 1)[-1]}) instead, {how}. {rec.sentence}"
    return out


def selector_summary(size: int, quant: str, fit: LibraryFit | None) -> str:
    """The model selector's line after a file's name: size on disk, quantization, fit on this machine."""
    from app.core.metrics.phase import fmt_bytes

    parts = [fmt_bytes(size)] if size else []
    if quant:
        parts.append(quant)
    if fit is not None:
        parts.append(fit.verdict)
    return " · ".join(parts)
