"""How many threads a load uses when nobody chose: one rule for the engine, the probes and the predictions.

llama.cpp's own default is the physical cores for decode and every logical core for prompt batches
(llama-cpp-python's would be `cpu_count // 2`: one thread on a 2-core VM). Both are held to the CPUs this
process may run on: in a container or under `taskset` the affinity mask is smaller than the machine, and
threads past it only time-share those CPUs (decode slows, a probe reports per-thread rates too low).
"""

from __future__ import annotations

import os
from typing import Any


def usable_cpus() -> int | None:
    """CPUs this process may run on (its affinity mask); None where the OS has no such API (macOS, Windows)."""
    try:
        return len(os.sched_getaffinity(0)) or None
    except (AttributeError, OSError):
        return None


def live_cpu_counts() -> tuple[int, int, int | None]:
    """(physical cores, logical cores, usable CPUs) of this machine now."""
    logical = os.cpu_count() or 1
    try:
        import psutil

        physical = psutil.cpu_count(logical=False) or logical
        logical = psutil.cpu_count(logical=True) or logical
    except Exception:  # noqa: BLE001 - psutil refusing on an odd platform: count logical CPUs only
        physical = logical
    return physical, logical, usable_cpus()


def default_threads(cpu: Any = None, *, batch: bool = False) -> int:
    """Threads for decode (or, with `batch`, for prompt batches) on `cpu` (a `hardware.CPUInfo`; None: this
    machine now)."""
    if cpu is None:
        physical, logical, usable = live_cpu_counts()
    else:
        logical = getattr(cpu, "logical_cores", None) or getattr(cpu, "physical_cores", None) or 1
        physical = getattr(cpu, "physical_cores", None) or logical
        usable = getattr(cpu, "usable_cpus", None)
    n = logical if batch else min(physical, logical)
    return max(1, min(n, usable) if usable else n)
