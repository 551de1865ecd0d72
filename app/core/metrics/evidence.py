"""What the machine did while one reply was written: the evidence "why is it slow?" reads
(`app.core.metrics.slowness`).

Two snapshots, one when the request arrives and one when the reply ends, taken in the engine's process (so
its own CPU time, page faults and disk reads are its own): the system's busy CPU time and every other
process's (the busiest one is named), the hypervisor's steal time, the engine's major page faults and the
bytes it read from storage (weights paged in from a mapped file), the CPU clock, and the bytes swapped in.
The load's GPU facts (layers llama.cpp really offloaded against the plan, device memory left) are added by
the engine, which knows them. Every reading may be missing on some system: a missing one is None, never a
guess, and the decision only uses what was read.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import psutil

TOP_PROCESSES = 3  # named in the evidence, busiest first


@dataclass
class Snapshot:
    t: float
    busy_s: float | None  # all CPUs' non-idle time (user, nice, system, irq, softirq), seconds
    steal_s: float | None
    engine_cpu_s: float | None  # this process's user + system time
    processes: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid → (name, CPU seconds)
    major_faults: int | None = None
    read_bytes: int | None = None  # bytes this process made the kernel fetch from storage
    freq_mhz: float | None = None
    freq_max_mhz: float | None = None
    swap_in_bytes: int | None = None


def _busy(times: Any) -> float:
    return sum(getattr(times, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq"))


def _major_faults(pid: int) -> int | None:
    """Field 12 of /proc/PID/stat (majflt); None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return int(stat.rsplit(")", 1)[1].split()[9])
    except (OSError, ValueError, IndexError):
        if pid == os.getpid():
            try:
                import resource

                return int(resource.getrusage(resource.RUSAGE_SELF).ru_majflt)
            except (ImportError, OSError):
                return None
        return None


def process_times(own: int) -> dict[int, tuple[str, float]]:
    """Every other process's CPU seconds so far (own: the process left out)."""
    out: dict[int, tuple[str, float]] = {}
    for p in psutil.process_iter(["name", "cpu_times"]):
        try:
            if p.pid == own or p.info["cpu_times"] is None:
                continue
            ct = p.info["cpu_times"]
            out[p.pid] = (p.info["name"] or str(p.pid), ct.user + ct.system)
        except (psutil.Error, AttributeError):
            continue
    return out


def take_snapshot(pid: int | None = None, processes: bool = True) -> Snapshot:
    """The readings now, for process `pid` (default: this one)."""
    pid = pid or os.getpid()
    snap = Snapshot(t=time.monotonic(), busy_s=None, steal_s=None, engine_cpu_s=None)
    try:
        times = psutil.cpu_times()
        snap.busy_s, snap.steal_s = _busy(times), getattr(times, "steal", None)
    except (psutil.Error, OSError):
        pass
    try:
        proc = psutil.Process(pid)
        ct = proc.cpu_times()
        snap.engine_cpu_s = ct.user + ct.system
        io = proc.io_counters() if hasattr(proc, "io_counters") else None
        snap.read_bytes = int(io.read_bytes) if io is not None else None
    except (psutil.Error, OSError, AttributeError):
        pass
    snap.major_faults = _major_faults(pid)
    try:
        freq = psutil.cpu_freq()
        if freq is not None and freq.current:
            snap.freq_mhz, snap.freq_max_mhz = float(freq.current), float(freq.max) or None
    except (psutil.Error, OSError, NotImplementedError, FileNotFoundError):
        pass
    try:
        snap.swap_in_bytes = int(psutil.swap_memory().sin)
    except (psutil.Error, OSError, RuntimeError):
        pass
    if processes:
        snap.processes = process_times(pid)
    return snap


@dataclass
class Evidence:
    """What the machine did during one reply (None: not read on this system)."""

    wall_s: float = 0.0
    n_cpus: int = 0
    threads: int = 0  # the engine's llama.cpp threads
    other_cores: float | None = None  # CPU cores' worth used by other processes, on average
    top_others: list[tuple[str, float]] = field(default_factory=list)  # (name, cores) busiest first
    steal_cores: float | None = None
    engine_cores: float | None = None
    major_faults: int | None = None
    disk_read_bytes: int | None = None
    freq_start_mhz: float | None = None
    freq_end_mhz: float | None = None
    freq_max_mhz: float | None = None
    swap_in_bytes: int | None = None
    gpu_layers_planned: int | None = None  # what the load asked for (n_gpu_layers; -1: all)
    gpu_layers_offloaded: int | None = None  # what llama.cpp's log says it offloaded
    gpu_layers_total: int | None = None  # of how many (the layers and the output)
    gpu_free_share: float | None = None  # the fullest device's free memory over its total, after the reply
    model_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        names = {f.name for f in fields(cls)}
        ev = cls(**{k: v for k, v in data.items() if k in names})
        ev.top_others = [(str(n), float(c)) for n, c in ev.top_others or []]  # JSON turns tuples into lists
        return ev


def _delta(a: float | None, b: float | None) -> float | None:
    return b - a if a is not None and b is not None else None


def between(before: Snapshot, after: Snapshot, threads: int = 0, n_cpus: int | None = None,
            top: int = TOP_PROCESSES) -> Evidence:
    """The evidence from two snapshots of the same process (`top`: how many other processes to name)."""
    wall = max(after.t - before.t, 1e-6)
    ev = Evidence(wall_s=wall, n_cpus=n_cpus or psutil.cpu_count() or 1, threads=threads)
    busy, own = _delta(before.busy_s, after.busy_s), _delta(before.engine_cpu_s, after.engine_cpu_s)
    if own is not None:
        ev.engine_cores = own / wall
    if busy is not None and own is not None:
        ev.other_cores = min(max(busy - own, 0.0) / wall, ev.n_cpus)  # clock ticks: a short reply's jitter
    steal = _delta(before.steal_s, after.steal_s)
    ev.steal_cores = steal / wall if steal is not None else None
    used = []
    for pid, (name, cpu) in after.processes.items():
        if pid in before.processes and before.processes[pid][0] == name:
            used.append((name, (cpu - before.processes[pid][1]) / wall))
    ev.top_others = [(n, round(c, 3)) for n, c in sorted(used, key=lambda x: -x[1])[:top] if c > 0.01]
    mf = _delta(before.major_faults, after.major_faults)
    ev.major_faults = int(mf) if mf is not None else None
    rb = _delta(before.read_bytes, after.read_bytes)
    ev.disk_read_bytes = int(rb) if rb is not None else None
    ev.freq_start_mhz, ev.freq_end_mhz = before.freq_mhz, after.freq_mhz
    ev.freq_max_mhz = after.freq_max_mhz or before.freq_max_mhz
    si = _delta(before.swap_in_bytes, after.swap_in_bytes)
    ev.swap_in_bytes = int(si) if si is not None else None
    return ev


_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_ASSIGNED = re.compile(r"layer\s+(\d+) assigned to device (\S+?),")


def offloaded_layers(log_lines: list[str]) -> tuple[int, int] | None:
    """(layers on a GPU, of how many: the repeating ones and the output) of the last load, from llama.cpp's load
    log; None when the log does not say.

    The truth is in the per-layer lines ("layer  12 assigned to device Vulkan0", the output layer last, every
    build prints them): the summary "offloaded 12/29 layers to GPU" is worked out from the request, and a GPU
    build without a usable device (a missing driver, a device it skips) prints no summary at all while every
    layer runs on the CPU. The summary counts only where the per-layer lines are missing."""
    assigned: dict[int, str] = {}
    summary: tuple[int, int] | None = None
    for line in reversed(log_lines):  # the per-layer lines come before the summary
        m = _ASSIGNED.search(line)
        if m:
            assigned.setdefault(int(m.group(1)), m.group(2))
            if int(m.group(1)) == 0:
                break  # the last load's first layer: its whole list is read
        elif not assigned and (s := _OFFLOADED.search(line)) is not None:
            if summary is not None:
                break  # an earlier load's summary: the last load had no per-layer lines
            summary = int(s.group(1)), int(s.group(2))
    if assigned:
        return sum(1 for dev in assigned.values() if not dev.upper().startswith("CPU")), len(assigned)
    return summary


def gpu_free_share(devices: list[dict[str, Any]]) -> float | None:
    """The fullest GPU's free memory over its total (Stats.devices); None without a GPU that says."""
    shares = [d["memory_free"] / d["memory_total"] for d in devices
              if isinstance(d.get("memory_total"), int) and d["memory_total"] > 0
              and isinstance(d.get("memory_free"), int)]
    return min(shares) if shares else None
