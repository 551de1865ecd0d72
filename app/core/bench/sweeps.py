"""Benchmark sweeps: plan the measurements, run them through a backend, and analyse them into one finding
(app.core.bench.sweep_findings, per kind).

Pure Python (no Qt, no llama_cpp, no engine): the CLI and the Lab page hand `run_sweep` a `SweepBackend`
that talks to the engine (llama-bench style `Bench`) or to a remote server (timed `Generate`). Results
are llama-bench rows (app.core.bench.llama_bench_format.bench_row field names) plus an analysis per kind:

- grid    prompt length × generation length: each cell's time split into prefill (ppP) and decode (tgG at
          depth P), which phase dominates, and the prompt length where prefill starts to dominate
          (linear interpolation between the measured prompt lengths)
- depth   decode tok/s vs KV depth (llama-bench -d)
- ubatch  prefill tok/s vs n_ubatch (chunked prefill; one reload per value)
- threads prefill and decode tok/s vs thread count (one reload per value)
- kv      A/B of KV cache type (f16 / q8_0) and flash attention
- offload prefill and decode tok/s vs n_gpu_layers (one reload per value), beside the speed model's predicted
          decode at each (`attach_offload_prediction`): a GPU's measured curve against the one the picker uses
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.bench.llama_bench_format import bench_row
from app.core.bench.sweep_findings import ANALYSES

KINDS = ("grid", "depth", "ubatch", "threads", "kv", "offload")

DEFAULTS: dict[str, dict[str, Any]] = {
    "grid": {"prompts": [64, 128, 256, 512, 1024], "gens": [32, 128]},
    "depth": {"depths": [0, 256, 512, 1024, 2048], "n_gen": 32},
    "ubatch": {"ubatches": [32, 64, 128, 256, 512], "n_prompt": 512},
    "threads": {"threads": [], "n_prompt": 256, "n_gen": 32},  # [] -> 1 .. logical cores
    "kv": {"n_prompt": 512, "n_gen": 32, "n_depth": 512},
    "offload": {"layers": [], "n_layers": 0, "n_prompt": 128, "n_gen": 16},  # [] -> 0, ¼, ½, ¾, all of n_layers
}

KV_VARIANTS: list[dict[str, Any]] = [
    {"type_k": "f16", "type_v": "f16", "flash_attn": False},
    {"type_k": "f16", "type_v": "f16", "flash_attn": True},
    # a quantized V cache needs flash attention in llama.cpp, so there is no q8_0 / off variant
    {"type_k": "q8_0", "type_v": "q8_0", "flash_attn": True},
]


@dataclass(frozen=True)
class Step:
    """One llama-bench test under one load configuration (`config`: LoadConfig field overrides)."""

    n_prompt: int
    n_gen: int
    n_depth: int = 0
    config: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        test = f"pp{self.n_prompt}" if self.n_prompt else f"tg{self.n_gen}"
        if self.n_depth:
            test += f" @ d{self.n_depth}"
        cfg = " ".join(f"{k}={_short(v)}" for k, v in self.config)
        return f"{test} {cfg}".strip()

    @property
    def config_dict(self) -> dict[str, Any]:
        return dict(self.config)


def _short(v: Any) -> str:
    return {True: "on", False: "off"}.get(v, str(v)) if isinstance(v, bool) else str(v)


@dataclass
class Measurement:
    step: Step
    samples_ns: list[int]
    model_info: dict[str, Any]
    tokens: int = 0  # tokens the samples cover (defaults to n_prompt + n_gen)

    @property
    def ms(self) -> float:
        return statistics.fmean(self.samples_ns) / 1e6 if self.samples_ns else math.nan

    @property
    def tps(self) -> float:
        n = self.tokens or (self.step.n_prompt + self.step.n_gen)
        return n / (self.ms / 1000.0) if self.samples_ns and self.ms > 0 else math.nan


class SweepBackend(Protocol):
    """What a sweep needs from an engine. `measure` may raise SweepCancelled."""

    remote: bool

    def configure(self, config: dict[str, Any]) -> None: ...

    def measure(self, step: Step, repetitions: int) -> Measurement: ...

    def describe(self) -> dict[str, Any]: ...


class SweepCancelled(Exception):
    pass


@dataclass
class SweepResult:
    kind: str
    measurements: list[Measurement]
    points: list[dict[str, Any]]
    finding: str
    crossover: dict[str, float] | None = None
    cancelled: bool = False
    backend: dict[str, Any] = field(default_factory=dict)
    predicted: list[dict[str, Any]] = field(default_factory=list)  # offload: the speed model's decode per ngl

    def rows(self) -> list[dict[str, Any]]:
        """llama-bench rows (same field names and meaning), one per measurement."""
        out = []
        be = self.backend
        for m in self.measurements:
            info = m.model_info
            if "prefill_samples_ns" in info:  # remote: one timed request, reported as llama-bench's two tests
                parts = [(m.step.n_prompt, 0, 0, list(info["prefill_samples_ns"])),
                         (0, m.tokens, m.step.n_prompt, m.samples_ns)]
            else:
                parts = [(m.step.n_prompt, m.step.n_gen, m.step.n_depth, m.samples_ns)]
            for n_prompt, n_gen, n_depth, samples in parts:
                out.append(bench_row(n_prompt=n_prompt, n_gen=n_gen, n_depth=n_depth, samples_ns=samples,
                                     model_info=info, backend=str(be.get("backend", "CPU")),
                                     build=str(be.get("build", ""))))
        return out

    def csv_text(self) -> str:
        buf = io.StringIO()
        if self.points:
            keys = list(self.points[0].keys())
            writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
            writer.writeheader()
            for p in self.points:
                writer.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in p.items()})
        return buf.getvalue()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "finding": self.finding, "crossover": self.crossover,
                "cancelled": self.cancelled, "points": self.points, "backend": self.backend,
                "predicted": self.predicted}


# ------------------------------------------------------------------------------------------ planning
def _cfg(**kw: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(kw.items()))


def plan(kind: str, opts: dict[str, Any] | None = None, n_cpus: int = 2, remote: bool = False) -> list[Step]:
    """The measurements of one sweep, ordered so that reloads happen once per configuration."""
    if kind not in KINDS:
        raise ValueError(f"unknown sweep {kind!r}; choose one of {', '.join(KINDS)}")
    o = {**DEFAULTS[kind], **(opts or {})}
    if remote and kind != "grid":
        raise ValueError(f"the {kind} sweep changes how the model is loaded; a remote server only runs 'grid'")
    if kind == "grid":
        prompts, gens = _positive(o["prompts"], "prompt lengths"), _positive(o["gens"], "generation lengths")
        if remote:  # one timed request per cell gives both phases
            return [Step(p, g) for p in prompts for g in gens]
        return [s for p in prompts for s in [Step(p, 0), *(Step(0, g, p) for g in gens)]]
    if kind == "depth":
        return [Step(0, int(o["n_gen"]), d) for d in _nonneg(o["depths"], "depths")]
    if kind == "ubatch":
        return [Step(int(o["n_prompt"]), 0, 0, _cfg(n_ubatch=u, n_batch=max(u, int(o["n_prompt"]))))
                for u in _positive(o["ubatches"], "n_ubatch values")]
    if kind == "offload":
        return [s for n in offload_layers(o) for s in (Step(int(o["n_prompt"]), 0, 0, _cfg(n_gpu_layers=n)),
                                                       Step(0, int(o["n_gen"]), 0, _cfg(n_gpu_layers=n)))]
    if kind == "threads":
        threads = _positive(o["threads"], "thread counts") if o["threads"] else list(range(1, max(1, n_cpus) + 1))
        return [s for t in threads for s in (Step(int(o["n_prompt"]), 0, 0, _cfg(n_threads=t, n_threads_batch=t)),
                                             Step(0, int(o["n_gen"]), 0, _cfg(n_threads=t, n_threads_batch=t)))]
    return [s for v in KV_VARIANTS for s in (Step(int(o["n_prompt"]), 0, 0, _cfg(**v)),
                                             Step(0, int(o["n_gen"]), int(o["n_depth"]), _cfg(**v)))]


def offload_layers(o: dict[str, Any]) -> list[int]:
    """The n_gpu_layers values of an offload sweep: those given, else none, a quarter, half, three quarters and
    all of the model's n_layers blocks (n_layers + 1: the output layer too)."""
    if o["layers"]:
        return _nonneg(o["layers"], "n_gpu_layers values")
    n = int(o["n_layers"])
    if n <= 0:
        raise ValueError("the offload sweep needs the model's layer count (or the n_gpu_layers values)")
    return sorted({0, n // 4, n // 2, 3 * n // 4, n + 1})


def attach_offload_prediction(result: SweepResult, predict_decode: Callable[[int], float]) -> None:
    """The speed model's decode tok/s at each measured n_gpu_layers beside the measurement, and in the finding
    how far the two are apart at full offload (`predict_decode(n_gpu_layers)`: e.g. app.core.predict.speed)."""
    result.predicted = [{"n_gpu_layers": p["n_gpu_layers"], "decode_tps": predict_decode(p["n_gpu_layers"])}
                        for p in result.points]
    pairs = [(p["decode_tps"], q["decode_tps"]) for p, q in zip(result.points, result.predicted, strict=True)
             if math.isfinite(p["decode_tps"]) and p["decode_tps"] > 0]
    if pairs:
        measured, predicted = pairs[-1]
        result.finding += f" Predicted decode at the most layers: {predicted:.1f} tok/s ({predicted / measured:.2f}× " \
                          "the measured)."


def _positive(values: list[int], what: str) -> list[int]:
    vals = sorted({int(v) for v in values})
    if not vals or vals[0] <= 0:
        raise ValueError(f"{what} must be positive numbers")
    return vals


def _nonneg(values: list[int], what: str) -> list[int]:
    vals = sorted({int(v) for v in values})
    if not vals or vals[0] < 0:
        raise ValueError(f"{what} must be numbers ≥ 0")
    return vals


def context_needed(steps: list[Step]) -> int:
    need = max((s.n_prompt + s.n_gen + s.n_depth for s in steps), default=256)
    return max(256, -(-(need + 8) // 256) * 256)


# ------------------------------------------------------------------------------------------ running
def run_sweep(kind: str, steps: list[Step], backend: SweepBackend, repetitions: int = 3,
              progress: Callable[[int, int, str], None] | None = None,
              cancelled: Callable[[], bool] | None = None,
              partial: Callable[[SweepResult], None] | None = None) -> SweepResult:
    """Measure every step (grouped by configuration), then analyse. A cancel keeps what was measured.
    `partial`, when given, gets the analysis of what is measured so far after each measurement (a chart
    drawn as the points come)."""
    measurements: list[Measurement] = []
    was_cancelled = False
    current: dict[str, Any] | None = None
    for i, step in enumerate(steps):
        if cancelled is not None and cancelled():
            was_cancelled = True
            break
        if progress is not None:
            progress(i, len(steps), step.label)
        try:
            if step.config_dict != current:
                backend.configure(step.config_dict)
                current = step.config_dict
            measurements.append(backend.measure(step, repetitions))
            if partial is not None:
                partial(analyse(kind, list(measurements)))
        except SweepCancelled:
            was_cancelled = True
            break
    if progress is not None:
        progress(len(measurements), len(steps), "cancelled" if was_cancelled else "done")
    result = analyse(kind, measurements)
    result.cancelled = was_cancelled
    result.backend = backend.describe()
    if was_cancelled:
        result.finding = f"(cancelled after {len(measurements)} of {len(steps)} measurements) " + result.finding
    return result


# ------------------------------------------------------------------------------------------ analysis
def analyse(kind: str, ms: list[Measurement]) -> SweepResult:
    points, finding, cross = ANALYSES[kind](ms)
    return SweepResult(kind, ms, points, finding, cross)
