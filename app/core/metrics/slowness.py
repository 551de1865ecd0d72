""""Why is it slow?": when a reply's measured decode or prefill is well under what the speed model predicts for
this load, the most likely cause from the evidence of that reply (`app.core.metrics.evidence`), in one line.

Each cause found in the evidence gets a strength (how far past its threshold the reading is); the strongest
is named. A load with fewer GPU layers than planned is certain (llama.cpp's own count), so it wins over
everything else; then swapping, weights read from storage during the reply (a mapped file paged in), other
processes' CPU load or a hypervisor's steal time, and a lower CPU clock. When nothing stands out the line
says so rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.metrics.evidence import Evidence
from app.core.metrics.phase import fmt_bytes

SLOW = 0.7  # measured under this share of the prediction: say why
SWAP_BYTES = 16 * 2**20
READ_BYTES = 32 * 2**20  # read from storage during one reply: weights paged in
MAJOR_FAULTS = 200
OTHER_SHARE = 0.25  # other processes using a quarter of the CPUs …
OTHER_MIN_CORES = 0.5  # … and at least half a core
FREQ_DROP = 0.8  # the clock under this share of its maximum (or of its value when the reply started)
GPU_FULL = 0.02  # a device with less free memory than this share may be spilling to shared memory


@dataclass(frozen=True)
class Cause:
    strength: float  # ≥ 1: past its threshold; the strongest is named
    line: str
    rank: int = 0  # llama.cpp's own counts (GPU layers 2, GPU memory 1) beat any reading of the machine


def _fmt_cores(x: float) -> str:
    return f"{x:.1f}"


def gpu_shortfall(planned: int | None, placed: int | None, total: int | None) -> str:
    """"only 0 of 19 layers are on the GPU (the plan was 19): the rest run on the CPU" when llama.cpp placed
    fewer layers on a GPU than the load asked for (planned -1 or not said: all), else "". Said after the load
    and, when a reply is slow, as its cause."""
    if placed is None or not total or planned == 0:
        return ""
    want = total if planned is None or planned < 0 else min(planned, total)
    if placed >= want:
        return ""
    return f"only {placed} of {total} layers are on the GPU (the plan was {want}): the rest run on the CPU"


def placement_warning(shortfall: str) -> str:
    """The load's warning for a `gpu_shortfall` line (the window's banner, `roofline chat`)."""
    return (f"{shortfall[0].upper()}{shortfall[1:]}. llama.cpp found no GPU it could use for them: `roofline hw` "
            "lists the devices it sees.")


def causes(ev: Evidence) -> list[Cause]:
    """Every cause the evidence supports, strongest first."""
    found: list[Cause] = []
    shortfall = gpu_shortfall(ev.gpu_layers_planned, ev.gpu_layers_offloaded, ev.gpu_layers_total)
    if shortfall:
        found.append(Cause(1.0, rank=2, line=shortfall))
    if ev.gpu_free_share is not None and ev.gpu_free_share < GPU_FULL and (ev.gpu_layers_offloaded or 0) > 0:
        found.append(Cause(1.0, rank=1, line=f"GPU memory is full ({ev.gpu_free_share:.0%} free): the driver may be "
                                             "spilling buffers to shared system memory"))
    if ev.swap_in_bytes is not None and ev.swap_in_bytes >= SWAP_BYTES:
        found.append(Cause(2.0 * ev.swap_in_bytes / SWAP_BYTES,
                           f"the system swapped {fmt_bytes(ev.swap_in_bytes)} in during the reply: RAM is short"))
    read = ev.disk_read_bytes or 0
    faults = ev.major_faults or 0
    if read >= READ_BYTES or faults >= MAJOR_FAULTS:
        share = f" ({read / ev.model_bytes:.0%} of the model)" if ev.model_bytes and read else ""
        what = f"{fmt_bytes(read)} read from disk{share}" if read else f"{faults} major page faults"
        found.append(Cause(max(read / READ_BYTES, faults / MAJOR_FAULTS),
                           f"weights paged in from the mapped model file during the reply: {what}"))
    n = max(ev.n_cpus, 1)
    if ev.other_cores is not None:
        limit = max(OTHER_MIN_CORES, OTHER_SHARE * n)
        if ev.other_cores >= limit:
            top = ", ".join(f"{name} {_fmt_cores(c)}" for name, c in ev.top_others[:2] if c >= 0.1)
            found.append(Cause(ev.other_cores / limit,
                               f"other processes used {_fmt_cores(ev.other_cores)} of {n} CPU cores during the reply"
                               + (f" (busiest: {top})" if top else "")))
    if ev.steal_cores is not None and ev.steal_cores >= max(OTHER_MIN_CORES, OTHER_SHARE * n):
        found.append(Cause(ev.steal_cores / max(OTHER_MIN_CORES, OTHER_SHARE * n),
                           f"the hypervisor took {_fmt_cores(ev.steal_cores)} of {n} CPU cores (steal time)"))
    clocks = [f for f in (ev.freq_start_mhz, ev.freq_end_mhz) if f]
    if clocks:
        low = min(clocks)
        ref = ev.freq_max_mhz or max(clocks)
        if ref and low < FREQ_DROP * ref:
            found.append(Cause(FREQ_DROP * ref / low, f"the CPU clock fell to {low / 1000:.2f} of {ref / 1000:.2f} "
                                                      "GHz (a power or heat limit)"))
    return sorted(found, key=lambda c: (-c.rank, -c.strength))


def slow_line(phase: str, measured_tps: float, predicted_tps: float, ev: Evidence | None) -> str:
    """"decode 12 tok/s, 0.45× the prediction (27): <cause>", or "" when the phase is not slow (or unknown)."""
    if not (measured_tps > 0 and predicted_tps > 0) or measured_tps >= SLOW * predicted_tps:
        return ""
    head = f"{phase} {measured_tps:.0f} tok/s, {measured_tps / predicted_tps:.2f}× the prediction " \
           f"({predicted_tps:.0f})"
    found = causes(ev) if ev is not None else []
    if not found:
        return head + ": no cause in the evidence (other load, page faults, GPU layers, CPU clock, swap all normal)" \
            if ev is not None else head + ": no evidence was recorded for this reply"
    return f"{head}: {found[0].line}"


def reply_slow_line(measured_decode: float, predicted_decode: float, measured_prefill: float,
                    predicted_prefill: float, ev: Evidence | None) -> str:
    """The one line for a reply: the slower phase (relative to its prediction) that is under SLOW."""
    lines = []
    for phase, m, p in (("decode", measured_decode, predicted_decode), ("prefill", measured_prefill,
                                                                        predicted_prefill)):
        line = slow_line(phase, m, p, ev)
        if line:
            lines.append((m / p, line))
    return min(lines)[1] if lines else ""
