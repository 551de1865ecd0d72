"""Fit the speed model's rates to measured runs, and keep them per machine and backend.

Decode samples are (bytes read per token, tokens/s); with at least two clearly different byte counts
(two models, or one model at two KV depths) a least-squares line through seconds/token = bytes /
(η·BW) + t0 gives both the effective bandwidth η·BW and the fixed overhead t0; with one (or when the
line is unphysical), t0 keeps its default and only η·BW is fitted, on the smallest byte count.
When the base rates have a compute roof (CPUs) and the samples carry FLOPs, the same fit runs on the
time each sample would take at the base rates and scales both roofs of the roofline by one factor.
Prefill samples are (FLOPs per token, tokens/s); the effective FLOP/s is their median product. Results live in `paths.cache_dir()/calibration.json`, keyed by machine
key and backend ("cpu", "cuda", "metal", ...).
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core import paths
from app.core.speed import DeviceRates, Rates

CACHE_FILE = "calibration.json"
MIN_SPREAD = 1.05  # byte counts must differ by 5 % before a line fit means anything
MAX_T0 = 0.02  # published per-token overheads are 1-6 ms; a fit far above that is noise


@dataclass
class DecodeSample:
    bytes_per_token: float
    tokens_per_s: float
    flops_per_token: float = 0.0  # known: the roofline's compute roof can be calibrated too


@dataclass
class PrefillSample:
    flops_per_token: float
    tokens_per_s: float


@dataclass
class Calibration:
    machine_key: str
    backend: str
    effective_bandwidth_gbs: float  # η·BW
    t0_s: float
    t0_fitted: bool
    prefill_gflops: float
    n_decode_samples: int
    n_prefill_samples: int
    n_threads: int | None = None
    model: str = ""
    measured_at: str = ""
    decode_gflops: float = 0.0  # compute roof for decode; 0: the effective bandwidth alone describes decode

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def fit_decode(samples: list[DecodeSample], t0_default: float) -> tuple[float, float, bool]:
    """(η·BW in bytes/s, t0 in s, whether t0 was fitted) from decode samples."""
    pts = [(s.bytes_per_token, 1.0 / s.tokens_per_s) for s in samples if s.tokens_per_s > 0 and s.bytes_per_token > 0]
    if not pts:
        raise ValueError("no usable decode samples")
    xs = [x for x, _ in pts]
    if len(pts) >= 2 and max(xs) / min(xs) >= MIN_SPREAD:
        mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in pts)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
        t0 = my - slope * mx
        # a physical fit: positive cost per byte, an overhead that is small next to a token's time
        if slope > 0 and 0 <= t0 <= min(MAX_T0, 0.5 * min(y for _, y in pts)):
            return 1.0 / slope, t0, True
        # the line is meaningless (negative overhead: at depth the step slows more than its extra bytes
        # explain, e.g. attention compute on a tiny model): keep the default overhead and fit the
        # smallest byte count, which is the common case (an empty or short context)
    smallest = min(xs)
    pts = [(x, y) for x, y in pts if x <= smallest * MIN_SPREAD] if len(set(xs)) > 1 else pts
    t0 = min(t0_default, 0.5 * min(y for _, y in pts))
    rates = [x / (y - t0) for x, y in pts]
    return statistics.median(rates), t0, False


def fit_prefill(samples: list[PrefillSample]) -> float:
    """Effective FLOP/s from prefill samples (median, robust to one slow run)."""
    values = [s.flops_per_token * s.tokens_per_s for s in samples if s.tokens_per_s > 0]
    if not values:
        raise ValueError("no usable prefill samples")
    return statistics.median(values)


def calibrate(machine_key: str, backend: str, decode: list[DecodeSample], prefill: list[PrefillSample],
              t0_default: float, n_threads: int | None = None, model: str = "",
              base: DeviceRates | None = None) -> Calibration:
    """Fit rates to samples. With `base` rates that have a compute roof (CPUs) and samples that carry
    FLOPs, the roofline keeps its shape: the time each sample would take at the base rates,
    max(bytes / (η·BW), FLOPs / decode FLOP/s), is fitted against the measured time, and both roofs are
    scaled by the one factor found. That transfers better to models with another FLOPs-per-byte ratio
    than folding everything into one effective bandwidth."""
    roofline = base is not None and base.decode_flops > 0 and all(d.flops_per_token > 0 for d in decode)
    if roofline:
        assert base is not None
        at_base = [DecodeSample(max(d.bytes_per_token / base.effective_bandwidth,
                                    d.flops_per_token / base.decode_flops), d.tokens_per_s) for d in decode]
        scale, t0, fitted = fit_decode(at_base, t0_default)
        eff_bw, decode_gflops = scale * base.effective_bandwidth, scale * base.decode_flops / 1e9
    else:
        eff_bw, t0, fitted = fit_decode(decode, t0_default)
        decode_gflops = 0.0
    return Calibration(
        machine_key=machine_key, backend=backend, effective_bandwidth_gbs=eff_bw / 1e9, t0_s=t0,
        t0_fitted=fitted, prefill_gflops=fit_prefill(prefill) / 1e9, n_decode_samples=len(decode),
        n_prefill_samples=len(prefill), n_threads=n_threads, model=model,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"), decode_gflops=decode_gflops,
    )


def apply(rates: DeviceRates, cal: Calibration) -> DeviceRates:
    """Rates with the calibrated values (η expressed against the device's own bandwidth figure)."""
    return replace(
        rates, efficiency=cal.effective_bandwidth_gbs / rates.bandwidth_gbs, t0_s=cal.t0_s,
        prefill_flops=cal.prefill_gflops * 1e9, calibrated=True,
        decode_flops=cal.decode_gflops * 1e9,  # 0: the fitted bandwidth already includes any compute limit
        source=f"calibrated {cal.measured_at} on {cal.model or 'a model'}",
    )


def calibrated_rates(rates: Rates, machine_key: str, cpu_backend: str = "cpu",
                     gpu_backend: str | None = None) -> Rates:
    """`rates` with stored calibrations applied where there are any."""
    cpu_cal = load(machine_key, cpu_backend)
    gpu_cal = load(machine_key, gpu_backend) if gpu_backend and rates.gpu else None
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


def store(cal: Calibration) -> None:
    data = _read_all()
    data[f"{cal.machine_key}/{cal.backend}"] = cal.to_dict()
    tmp = _path().with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, _path())


def load(machine_key: str, backend: str) -> Calibration | None:
    entry = _read_all().get(f"{machine_key}/{backend}")
    if not isinstance(entry, dict):
        return None
    try:
        return Calibration.from_dict(entry)
    except TypeError:
        return None  # an entry from an incompatible version: calibrate again
