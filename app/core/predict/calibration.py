"""Fit the speed model's rates to measured runs on several models, and keep them per machine and backend.

A sample is one measured run (decode at some depth, or a prefill) with the speed model's parts for it at
the uncalibrated rates (`speed.cost_parts`): per weight group a memory time and a compute time, plus the
fixed costs. The fit keeps the model's physics and finds these numbers:

* a bandwidth scale and a compute scale for decode, searched on a log grid (then a 1 % grid around the
  best), with the per-layer overhead (thread synchronisation) solved in closed form for each pair (least
  squares on relative error, ≥ 0; the small per-token t0 keeps its default);
* on top of the compute scale, a decode scale for each ggml type that does most of some decode run's
  compute (coordinate descent, three sweeps; `roofline calibrate` decodes a short model in Q8_0 and in Q4_0
  for this, with random weights: zeros decode Q8_0 faster than real weights);
* a prefill compute scale, searched the same way with the bandwidth found for decode, then a scale of its
  own for each ggml type that does most of the compute of some prefill run (coordinate descent over those
  types): a machine's GEMM kernels differ by type far more than one factor can say (Q8_0 prefill ran 0.58x
  Q4_K's on an Intel Xeon, 0.77x on an AMD EPYC), so `roofline calibrate` measures the common types'
  prompt batches on a short model of each (`KERNEL_PROBES` there).

Samples from models of different shapes and quantizations (the default model and zoo models, see
`roofline calibrate`) pin the two decode scales apart: a model whose groups are memory-bound constrains
the bandwidth, a compute-bound one the kernels. With one model the two scales trade off, so the fit
prefers the pair closest to the uncalibrated rates among those that explain the runs about equally well.
Results live in `paths.cache_dir()/calibration.json`, keyed by machine key, backend and llama.cpp thread
count: the overheads and the kernels' share of the cores differ with the threads, so a calibration only
applies to rates for the thread count it was measured with (`DeviceRates.threads`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.config import paths
from app.core.files import atomic_write
from app.core.predict.speed import DeviceRates, Parts, Rates

CACHE_FILE = "calibration.json"
VERSION = 2  # entries of the single-rate model (version 1) are not reused: calibrate again
MAX_T_LAYER = 0.002  # a layer's thread synchronisation; far above that is noise
GRID = [2 ** (k / 8) for k in range(-24, 25)]  # scales 1/8 .. 8 in steps of 9 %
TIE = 1.02  # fits within 2 % of the best error count as equal; the one nearest the base rates wins
DOMINANT = 0.5  # a type gets its own scale from runs where it does at least this share of the compute


@dataclass
class Sample:
    """One measured run and the speed model's parts for it at the base (uncalibrated) rates."""

    kind: str  # "decode" | "prefill"
    tokens_per_s: float
    tokens: int  # tokens the run's time covers per parts evaluation: 1 for decode, n_prompt for prefill
    parts: Parts
    model: str = ""
    depth: int = 0
    probe: bool = False  # a kernel probe's run: it sets only its own type's scales, not the common ones

    @property
    def seconds(self) -> float:
        return self.tokens / self.tokens_per_s


@dataclass
class Calibration:
    machine_key: str
    backend: str
    effective_bandwidth_gbs: float  # η·BW
    t0_s: float
    t0_fitted: bool  # False: t0 is the default (only the per-layer overhead is fitted)
    prefill_gflops: float  # attention's rate after scaling (the generic prefill rate)
    n_decode_samples: int
    n_prefill_samples: int
    n_threads: int | None = None
    model: str = ""  # the models measured, comma-separated
    measured_at: str = ""
    decode_scale: float = 1.0  # × the base decode kernel rates
    prefill_scale: float = 1.0  # × the base prefill matmul rates
    version: int = VERSION
    fit_error: float = 0.0  # root-mean-square relative error of the fit over its samples
    models: list[str] = field(default_factory=list)
    t_layer_s: float = 0.0  # per layer per token (thread synchronisation after each graph node)
    prefill_type_scales: dict[str, float] = field(default_factory=dict)  # type → × prefill_scale
    decode_type_scales: dict[str, float] = field(default_factory=dict)  # type → × decode_scale

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def _rms(errors: list[float]) -> float:
    return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0


def _fine(x: float) -> list[float]:
    """A finer grid around a coarse grid point (one coarse step either side, 1 % steps)."""
    return [x * 2 ** (k / 64) for k in range(-8, 9)]


def _layer_overhead(pts: list[Sample], core: list[float], t0: float) -> float:
    """The per-layer overhead minimising Σ ((core + t0·k + tl·L - y) / y)², ≥ 0. t0 itself stays at its
    default: the calibration models have 16-24 layers, too alike to tell a per-token cost from a per-layer one,
    and on CPUs the per-layer synchronisation is most of the overhead."""
    num = sum((s.seconds - k - t0 * s.parts.t0_count) * s.parts.layer_count / s.seconds ** 2
              for s, k in zip(pts, core, strict=True))
    den = sum((s.parts.layer_count / s.seconds) ** 2 for s in pts)
    return min(max(num / den, 0.0), MAX_T_LAYER) if den else 0.0


def fit_decode(samples: list[Sample], t0_default: float) -> tuple[float, float, float, float, float]:
    """(bandwidth scale, compute scale, t0 (the default), per-layer overhead, rms relative error)."""
    pts = [s for s in samples if s.kind == "decode" and s.tokens_per_s > 0]
    if not pts:
        raise ValueError("no usable decode samples")
    def score(a: float, c: float) -> tuple[float, float, float, float, float]:
        core = [s.parts.time(a, c) for s in pts]
        tl = _layer_overhead(pts, core, t0_default)
        err = _rms([(k + t0_default * s.parts.t0_count + tl * s.parts.layer_count) / s.seconds - 1
                    for s, k in zip(pts, core, strict=True)])
        return err, a, c, t0_default, tl

    def pick(cands: list[tuple[float, float, float, float, float]]) -> tuple[float, float, float, float, float]:
        lowest = min(x[0] for x in cands)
        near = [b for b in cands if b[0] <= lowest * TIE + 1e-4]
        return min(near, key=lambda b: abs(math.log(b[1])) + abs(math.log(b[2])))

    _, a0, c0, _, _ = pick([score(a, c) for a in GRID for c in GRID])
    err, a, c, t0, tl = pick([score(a, c) for a in _fine(a0) for c in _fine(c0)])
    return a, c, t0, tl, err


def _common(samples: list[Sample]) -> list[Sample]:
    """The runs the common scales are fitted on: all but the kernel probes (when there are others)."""
    return [s for s in samples if not s.probe] or samples


def _type_scales(pts: list[Sample], error: Any) -> dict[str, float]:
    """Per-type scales minimising `error(scales)`, for each type that does at least DOMINANT of some run's
    compute: coordinate descent, three sweeps, each a coarse then a fine grid (ties: the scale nearest 1)."""
    own = sorted({k for s in pts for k, share in s.parts.alu_share().items() if share >= DOMINANT and k})
    scales: dict[str, float] = {}
    for _sweep in range(3 if own else 0):
        for k in own:
            def with_k(x: float, k: str = k) -> float:
                return float(error(scales | {k: x}))
            scales[k] = _pick(_fine(_pick(GRID, with_k)[1]), with_k)[1]
    return scales


def fit_decode_with_types(samples: list[Sample], t0_default: float
                          ) -> tuple[float, float, float, float, float, dict[str, float]]:
    """(bandwidth scale, compute scale, t0, per-layer overhead, rms error over all runs, per-type scales):
    the common scales and overheads from the model runs, then a kernel scale for each type that does most
    of some run's compute, with those held (a machine's matrix-vector kernels differ by type more than one
    factor says: Q8_0's ran 1.7x what Q4_K-calibrated rates said on an AMD EPYC without AVX-512). A type
    whose runs are bound by memory whatever its scale keeps 1 (the tie rule)."""
    a, c, t0, tl, _ = fit_decode(_common(samples), t0_default)
    pts = [s for s in samples if s.kind == "decode" and s.tokens_per_s > 0]

    def error(ts: dict[str, float]) -> float:
        return _rms([(s.parts.time(a, c, t0, tl, ts)) / s.seconds - 1 for s in pts])

    types = _type_scales(pts, error)
    return a, c, t0, tl, error(types), types


def _pick(grid: list[float], score: Any) -> tuple[float, float]:
    """(error, scale) of the best scale on `grid`; among those within TIE of it, the one nearest 1."""
    scored = [(score(x), x) for x in grid]
    lowest = min(e for e, _ in scored)
    return min((x for x in scored if x[0] <= lowest * TIE + 1e-4), key=lambda x: abs(math.log(x[1])))


def fit_prefill(samples: list[Sample], bw_scale: float, t0: float, t_layer: float = 0.0
                ) -> tuple[float, dict[str, float], float]:
    """(prefill compute scale, per-type scales on top of it, rms relative error) with the decode fit's
    bandwidth and overheads. A type gets a scale of its own when some run spends most of its compute in it;
    the others keep the common scale."""
    pts = [s for s in samples if s.kind == "prefill" and s.tokens_per_s > 0]
    if not pts:
        raise ValueError("no usable prefill samples")

    def err(c: float, ts: dict[str, float]) -> float:
        return _rms([s.parts.time(bw_scale, c, t0, t_layer, ts) / s.seconds - 1 for s in pts])

    common = _common(pts)

    def err_common(x: float) -> float:
        return _rms([s.parts.time(bw_scale, x, t0, t_layer) / s.seconds - 1 for s in common])

    _, c = _pick(_fine(_pick(GRID, err_common)[1]), err_common)
    scales = _type_scales(pts, lambda ts: err(c, ts))
    return c, scales, err(c, scales)


def calibrate(machine_key: str, backend: str, samples: list[Sample], base: DeviceRates,
              n_threads: int | None = None) -> Calibration:
    """Fit `base` rates' scales to measured samples (decode and prefill, one or more models)."""
    a, c, t0, tl, err_d, decode_types = fit_decode_with_types(samples, base.t0_s)
    p, type_scales, err_p = fit_prefill(samples, a, t0, tl)
    models = sorted({s.model for s in samples if s.model})
    n_dec = sum(s.kind == "decode" for s in samples)
    return Calibration(
        machine_key=machine_key, backend=backend, effective_bandwidth_gbs=a * base.effective_bandwidth / 1e9,
        t0_s=t0, t0_fitted=False, prefill_gflops=p * base.prefill_flops / 1e9, n_decode_samples=n_dec,
        n_prefill_samples=len(samples) - n_dec, n_threads=n_threads, model=", ".join(models),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"), decode_scale=c, prefill_scale=p,
        fit_error=max(err_d, err_p), models=models, t_layer_s=tl, prefill_type_scales=type_scales,
        decode_type_scales=decode_types,
    )


def apply(rates: DeviceRates, cal: Calibration) -> DeviceRates:
    """Rates with the calibrated values (η expressed against the device's own bandwidth figure)."""
    return replace(
        rates, efficiency=cal.effective_bandwidth_gbs / rates.bandwidth_gbs, t0_s=cal.t0_s, t_layer_s=cal.t_layer_s,
        prefill_flops=cal.prefill_gflops * 1e9, calibrated=True,
        decode_rates={t: v * cal.decode_scale * cal.decode_type_scales.get(t, 1.0)
                      for t, v in rates.decode_rates.items()},
        prefill_rates={t: v * cal.prefill_scale * cal.prefill_type_scales.get(t, 1.0)
                       for t, v in rates.prefill_rates.items()},
        # a step of a few streams is a decode step (llama_decode of one token per sequence): it scales with
        # the decode fit. The prefill scale comes from 256-token batches, whose kernels run differently: with
        # it, two threads' 16-stream steps on Llama-3.2-1B were predicted 1.28x too fast
        # (roofline sweep batch, docs/bench/2026-12-01-serve-runs.md)
        batch_rates={t: {w: (v * cal.decode_scale * cal.decode_type_scales.get(t, 1.0), row)
                         for w, (v, row) in tab.items()}
                     for t, tab in rates.batch_rates.items()},
        source=f"calibrated {cal.measured_at} on {cal.model or 'a model'}",
    )


def calibrated_rates(rates: Rates, machine_key: str, cpu_backend: str = "cpu",
                     gpu_backend: str | None = None) -> Rates:
    """`rates` with stored calibrations applied where there are any for the rates' thread count."""
    cpu_cal = load(machine_key, cpu_backend, rates.cpu.threads)
    gpu_cal = load(machine_key, gpu_backend, rates.cpu.threads) if gpu_backend and rates.gpu else None
    return Rates(
        cpu=apply(rates.cpu, cpu_cal) if cpu_cal else rates.cpu,
        gpu=apply(rates.gpu, gpu_cal) if gpu_cal and rates.gpu else rates.gpu,
    )


# ------------------------------------------------------------------------------------------ storage


def _path() -> Path:
    return paths.cache_dir() / CACHE_FILE


def _read_all() -> dict[str, Any]:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _key(machine_key: str, backend: str, n_threads: int | None) -> str:
    return f"{machine_key}/{backend}/t{n_threads or 0}"


def store(cal: Calibration) -> None:
    data = _read_all()
    data[_key(cal.machine_key, cal.backend, cal.n_threads)] = cal.to_dict()
    atomic_write.write_json(_path(), data)


def load(machine_key: str, backend: str, n_threads: int | None) -> Calibration | None:
    """The calibration measured with `n_threads` llama.cpp threads, if any (one for other threads does not
    apply: their overheads and share of the cores differ)."""
    entry = _read_all().get(_key(machine_key, backend, n_threads))
    if not isinstance(entry, dict) or entry.get("version") != VERSION:
        return None  # none, or one from an earlier model: calibrate again
    try:
        return Calibration.from_dict(entry)
    except TypeError:
        return None  # an entry from an incompatible version: calibrate again
