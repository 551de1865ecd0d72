"""Predicted decode speed of B sequences decoded together (continuous batching), from the speed model.

One step of a batch of B decodes reads every weight once, whatever B (plus each sequence's own KV cache),
and does B times the arithmetic. So the step's arithmetic intensity (FLOPs per byte read) grows about
linearly with B: at small B the step is memory-bound and costs nearly what one token costs, and the
aggregate rate grows with B; once B × FLOPs reaches the compute roof, each extra sequence adds its full
compute time and the aggregate flattens. That is the roofline's operating point moving right with B.

Each weight group (one ggml type) costs max(bytes / effective bandwidth, B · weights / rate(B)), where a
matrix-vector product runs at the type's decode rate and B columns sharing each dequantized weight raise it
toward the type's matrix-matrix (prefill) rate: rate(B) = min(B × decode rate, max(decode rate, prefill rate / 2))
weights/s
(the prefill rate counts 2 FLOPs a weight). Each sequence reads its own KV cache; the per-token and per-layer
overheads are paid once per step. At B = 1 this is exactly the single-request decode prediction
(app.core.speed.cost_parts). CPU only: the server runs on the CPU here. Pure Python, no llama_cpp.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from app.core.gguf_info import GGUFInfo
from app.core.memory import MemoryConfig
from app.core.speed import Rates, cost_parts, decode_flops, decode_traffic, weight_groups


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
    bw = r.effective_bandwidth
    groups = weight_groups(info, cfg, has_gpu=False)["cpu"]
    parts = cost_parts(info, Rates(r), cfg, depth=depth)["cpu"]
    kv_mem, kv_alu = parts.mem[-1], parts.alu[-1]  # the KV cache's read and attention (last part)
    overhead = r.t0_s + r.t_layer_s * parts.layer_count
    traffic = decode_traffic(info, cfg, depth, has_gpu=False)
    flops = decode_flops(info, cfg, depth, has_gpu=False)["cpu"]
    weights, kv = traffic.weights["cpu"], traffic.kv["cpu"]
    points = []
    for b in streams:
        t_mem = t_alu = 0.0
        step = overhead
        for gtype, g in groups.items():
            dec, mm = r.decode_rate(gtype), r.prefill_rate(gtype) / 2
            # no decode roof: one stream is memory-bound by definition; a batch meets the matrix-matrix roof
            rate = min(b * dec, max(dec, mm)) if dec else (mm if b > 1 else 0.0)
            mem, alu = g.bytes / bw, (b * g.elements / rate if rate else 0.0)
            step += max(mem, alu)
            t_mem, t_alu = t_mem + mem, t_alu + alu
        step += b * max(kv_mem, kv_alu)
        t_mem, t_alu = t_mem + b * kv_mem, t_alu + b * kv_alu
        read = weights + b * kv
        points.append(BatchPoint(b, step, b / step, 1.0 / step, b * flops / read,
                                 "compute" if t_alu > t_mem else "memory bandwidth"))
    return points


def stops_paying(points: list[tuple[int, float]], min_gain: float = 1.1) -> int | None:
    """The first stream count from which no count, this one or any later, gains `min_gain` × the best
    aggregate rate before it; None while the last count still gains. A dip followed by growth is not the
    end: on one CPU thread 2 streams can run slower than 1 (llama.cpp's quantized kernels only switch to
    matrix-matrix products at 4 columns) and 4, 8 and 16 still gain."""
    for i in range(1, len(points)):
        best_before = max(rate for _, rate in points[:i])
        if best_before > 0 and all(rate < min_gain * best_before for _, rate in points[i:]):
            return points[i][0]
    return None
