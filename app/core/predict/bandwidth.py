"""Measured main-memory bandwidth of this machine (what CPU decode speed is bound by).

A read probe sums buffers far larger than the last-level cache, one thread per core (numpy releases the
GIL inside reductions, so threads run in parallel), and once more with a single thread (the speed model
predicts for the threads a load uses: one thread rarely saturates the memory system); a copy probe is kept
for reference, and a small float32 matrix multiply gives a yardstick for compute (prefill). The best of a
few runs counts, and the whole measurement stays within about two seconds, allocation included.
Results are stored per machine (CPU model + RAM + core count) in `paths.cache_dir()`, with their date and whether
the machine was busy: the one measurement the dashboard's roofline, the Lab and Discover all read
(app.core.predict.machine_roofs turns it into the roofs the plots draw).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from app.core.config import paths
from app.core.files import atomic_write
from app.core.predict.threads import default_threads

MiB = 1 << 20
CACHE_FILE = "bandwidth.json"


@dataclass
class BandwidthResult:
    read_gbs: float  # GB/s (1e9 bytes) summing buffers: what decode streams weights at, at best
    copy_gbs: float  # GB/s counting bytes read + written
    threads: int
    buffer_bytes: int  # total over threads
    runs: int
    seconds: float  # wall time of the measurement
    measured_at: str
    machine_key: str = ""
    cached: bool = False
    gemm_gflops: float = 0.0  # float32 matrix multiply (numpy BLAS): a yardstick for prefill compute
    busy: bool = False  # other work competed for the cores: numbers are low, measure again next time
    read_gbs_1t: float = 0.0  # the read probe with one thread
    # the GEMM probe on one core: numpy's all-core figure scales less than llama.cpp's kernels do (1.64x vs
    # ~2x from one to two threads: docs/bench/2026-12-01-estimates-runs.md, runs E and F), so kernel rates
    # scale from the one-core figure
    gemm_gflops_1t: float = 0.0
    # when a re-measure asked for found the machine busy: that attempt's time. This quiet measurement was kept
    # over it (contention only lowers the figures, and a pick must not change with the load of the moment)
    kept_over_busy: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BandwidthResult:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def measure_bandwidth(threads: int | None = None, total_bytes: int | None = None,
                      budget_s: float = 2.0, max_runs: int = 10) -> BandwidthResult:
    """Measure now. total_bytes: default max(256 MiB, 64 MiB per thread), at most 1 GiB."""
    start = time.perf_counter()
    busy = machine_busy()
    n = threads or default_threads()
    total = total_bytes or min(1024 * MiB, max(256 * MiB, 64 * MiB * n))
    per = max(MiB, total // n) // 8 * 8
    bufs: list[np.ndarray] = [np.empty(per // 8, dtype=np.float64) for _ in range(n)]
    with ThreadPoolExecutor(max_workers=n) as pool:
        # first touch inside the worker threads: pages land near the core that reads them
        list(pool.map(lambda b: b.fill(1.0), bufs))

        def timed(fn: Any, bufs: list[np.ndarray] = bufs) -> float:
            t = time.perf_counter()
            list(pool.map(fn, bufs))
            return time.perf_counter() - t

        read_best = copy_best = float("inf")
        runs = 0
        # keep a reserve for the copy runs; stop early when the budget is spent
        while runs < max_runs and (runs < 2 or time.perf_counter() - start < budget_s * 0.7):
            read_best = min(read_best, timed(lambda b: b.sum()))
            runs += 1
        read_1t = read_best
        if n > 1:  # one thread alone, on one of the same buffers
            read_1t = float("inf")
            for _ in range(max(2, runs // 2)):
                t = time.perf_counter()
                bufs[0].sum()
                read_1t = min(read_1t, time.perf_counter() - t)
        half = per // 16

        def copy(b: np.ndarray) -> None:
            np.copyto(b[half:2 * half], b[:half])

        for _ in range(3):
            copy_best = min(copy_best, timed(copy))
            if time.perf_counter() - start > budget_s:
                break
    gemm = measure_gemm(n)
    gemm_1t = measure_gemm(1) if n > 1 else gemm
    return BandwidthResult(
        gemm_gflops=round(gemm, 1),
        gemm_gflops_1t=round(gemm_1t, 1),
        read_gbs=round(per * n / read_best / 1e9, 2),
        read_gbs_1t=round(per / read_1t / 1e9, 2),
        copy_gbs=round(2 * half * 8 * n / copy_best / 1e9, 2),
        threads=n, buffer_bytes=per * n, runs=runs,
        seconds=round(time.perf_counter() - start, 3),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        busy=busy or machine_busy(),
    )


def machine_busy() -> bool:
    """Is other work running (1-minute load average above the number of cores)? Unix only."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except (OSError, AttributeError):
        return False


def measure_gemm(threads: int | None = None, n: int = 512, budget_s: float = 0.25, max_runs: int = 60) -> float:
    """GFLOP/s of float32 n x n matrix multiplies, one per core at once (BLAS itself held to one thread:
    its own spinning threads collapse on a busy machine). The best round within `budget_s` counts."""
    workers = threads or default_threads()
    rng = np.random.default_rng(0)
    mats = [(rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)) for _ in range(workers)]

    def one(ab: tuple[np.ndarray, np.ndarray]) -> None:
        ab[0] @ ab[1]

    try:
        from threadpoolctl import threadpool_limits

        limit: Any = threadpool_limits(1, user_api="blas")
    except ImportError:  # without it BLAS threads itself: fine on an idle machine
        limit, workers, mats = contextlib.nullcontext(), 1, mats[:1]
    best = float("inf")
    with limit, ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in range(2):  # warm-up
            list(pool.map(one, mats))
        start = time.perf_counter()
        for _ in range(max_runs):
            t = time.perf_counter()
            list(pool.map(one, mats))
            best = min(best, time.perf_counter() - t)
            if t - start > budget_s:
                break
    return len(mats) * 2 * n**3 / best / 1e9


def _cache_path() -> Path:
    return paths.cache_dir() / CACHE_FILE


def load_cached(key: str) -> BandwidthResult | None:
    try:
        data = json.loads(_cache_path().read_text())
        entry = data.get(key)
        if not isinstance(entry, dict):
            return None
        result = BandwidthResult.from_dict(entry)
    except (OSError, ValueError, TypeError):
        return None  # missing or damaged cache: measure again
    if not result.gemm_gflops or not result.read_gbs_1t or not result.gemm_gflops_1t:
        return None  # written before the compute yardstick or the one-thread probes existed
    result.cached = True
    return result


def store(result: BandwidthResult) -> None:
    path = _cache_path()
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    entry = result.to_dict()
    entry.pop("cached", None)
    entry.pop("kept_over_busy", None)
    data[result.machine_key] = entry
    atomic_write.write_json(path, data)


def get_bandwidth(machine_key: str, remeasure: bool = False, **measure_kwargs: Any) -> BandwidthResult:
    """The stored measurement for this machine, or a fresh one (stored) when missing or asked.

    A stored result taken while the machine was busy is measured again; contention only ever lowers these
    numbers, so the better of the two is kept until a quiet measurement replaces it. For the same reason a
    re-measure that finds the machine busy never replaces a quiet measurement: the quiet one is returned, its
    `kept_over_busy` saying so (the dashboard, the Lab and Discover then keep agreeing with each other).
    """
    stored = load_cached(machine_key)
    if stored is not None and not stored.busy and not remeasure:
        return stored
    result = measure_bandwidth(**measure_kwargs)
    result.machine_key = machine_key
    if stored is not None and result.busy:
        if not stored.busy:
            stored.kept_over_busy = result.measured_at
            return stored
        result.read_gbs = max(result.read_gbs, stored.read_gbs)
        result.copy_gbs = max(result.copy_gbs, stored.copy_gbs)
        result.gemm_gflops = max(result.gemm_gflops, stored.gemm_gflops)
        result.read_gbs_1t = max(result.read_gbs_1t, stored.read_gbs_1t)
        result.gemm_gflops_1t = max(result.gemm_gflops_1t, stored.gemm_gflops_1t)
    store(result)
    return result
