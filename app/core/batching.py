"""Predicted decode speed of B sequences decoded together (continuous batching), from the speed model.

One step of a batch of B decodes reads every weight once, whatever B (plus each sequence's own KV cache),
and does B times the arithmetic. So the step's arithmetic intensity (FLOPs per byte read) grows about
linearly with B: at small B the step is memory-bound and costs nearly what one token costs, and the
aggregate rate grows with B; once B × FLOPs reaches the compute roof, each extra sequence adds its full
compute time and the aggregate flattens. That is the roofline's operating point moving right with B.

Step time = max(bytes(B) / effective bandwidth, B · FLOPs / compute roof(B)) + t0. The compute roof starts
at the decode roof (matrix-vector products, each weight dequantized for one use) and rises toward the
prefill roof (matrix-matrix) as B columns share each dequantized weight: min(prefill, B × decode).
A calibrated CPU has no separate decode roof (it is folded into its fitted bandwidth): its roof is the
prefill one. CPU only: the server runs on the CPU here. Pure Python, no llama_cpp.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from app.core.gguf_info import GGUFInfo
from app.core.memory import MemoryConfig
from app.core.speed import Rates, decode_flops, decode_traffic


@dataclass(frozen=True)
class BatchPoint:
    streams: int
    step_s: float
    aggregate_tps: float
    per_stream_tps: float
    intensity: float  # FLOPs per byte read in one step
    bound: str  # "memory bandwidth" | "compute"


def predict_batch(info: GGUFInfo, rates: Rates, streams: list[int], cfg: MemoryConfig | None = None,
                  depth: int = 0) -> list[BatchPoint]:
    cfg = cfg or MemoryConfig(n_gpu_layers=0)
    r = rates.cpu
    traffic = decode_traffic(info, cfg, depth, has_gpu=False)
    flops = decode_flops(info, cfg, depth, has_gpu=False)["cpu"]
    weights, kv = traffic.weights["cpu"], traffic.kv["cpu"]
    points = []
    for b in streams:
        read = weights + b * kv
        t_mem = read / r.effective_bandwidth
        roof = min(r.prefill_flops, b * r.decode_flops) if r.decode_flops else r.prefill_flops
        t_alu = b * flops / roof if roof else 0.0
        step = max(t_mem, t_alu) + r.t0_s
        points.append(BatchPoint(b, step, b / step, 1.0 / step, b * flops / read,
                                 "compute" if t_alu > t_mem else "memory bandwidth"))
    return points


def stops_paying(points: list[tuple[int, float]], min_gain: float = 1.1) -> int | None:
    """The first stream count whose aggregate rate is under `min_gain` × the previous count's, or None."""
    for (_, before), (n, rate) in itertools.pairwise(points):
        if before > 0 and rate < min_gain * before:
            return n
    return None
