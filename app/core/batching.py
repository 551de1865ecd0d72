"""Predicted decode speed of B sequences decoded together (continuous batching), from the speed model.

One step of a batch of B decodes reads every weight once, whatever B (plus each sequence's own KV cache),
and does B times the arithmetic, so the step's arithmetic intensity (FLOPs per byte read) grows about
linearly with B: the roofline's operating point moves right with B until it meets the compute roof.

How llama.cpp's CPU backend spends that arithmetic decides the curve, and it is not "B columns at the
matrix-vector cost": one column is a matrix-vector product (the decode rate); from two columns on, the
matrix-matrix kernels (tinyBLAS, the repacked GEMMs) take over. Measured on raw llama.cpp, one thread
(docs/serve.md): a step of B streams costs about one pass over the weights (what a decode step costs) plus
B columns at the matrix-matrix rate (the prefill rate, 2 FLOPs a weight) -- two streams cost 2.4x one on
the default model -- and, unlike a prompt, every stream's column goes through the output matrix (each
stream needs its logits), the largest matrix of a small model with a big vocabulary. So:

    step(1) = the single-request decode prediction (app.core.speed.cost_parts)
    step(B) = overheads + one decode step's weight pass + B x (all weights at the prefill rate + own KV)

Each sequence reads its own KV cache; the per-token and per-layer overheads are paid once per step. CPU only:
the server runs on the CPU here. Pure Python, no llama_cpp.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.gguf_info import GGUFInfo
from app.core.memory import MemoryConfig
from app.core.speed import Rates, cost_parts, decode_flops, decode_traffic, weight_groups
from app.core.speed_rates import MOE_PREFILL_EFFICIENCY, PREFILL_WIDTH


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
    mem_pass = alu_pass = step_pass = 0.0
    for gtype, g in groups.items():
        dec = r.decode_rate(gtype)
        mem, alu = g.bytes / bw, (g.elements / dec if dec else 0.0)
        step_pass += max(mem, alu)
        mem_pass, alu_pass = mem_pass + mem, alu_pass + alu
    column = matrix_column_s(info, rates, cfg)
    points = []
    for b in streams:
        if b == 1:
            step = overhead + step_pass + max(kv_mem, kv_alu)
            t_mem, t_alu = mem_pass + kv_mem, alu_pass + kv_alu
        else:
            step = overhead + step_pass + b * (column + max(kv_mem, kv_alu))
            t_mem, t_alu = mem_pass + b * kv_mem, alu_pass + b * (column + kv_alu)
        read = weights + b * kv
        points.append(BatchPoint(b, step, b / step, 1.0 / step, b * flops / read,
                                 "compute" if t_alu > t_mem else "memory bandwidth"))
    return points


def matrix_column_s(info: GGUFInfo, rates: Rates, cfg: MemoryConfig | None = None) -> float:
    """Seconds one more stream's column costs a batched CPU step: every weight it multiplies, the output
    matrix included, at the type's matrix-matrix (prefill) rate, narrowed for a narrow model as the prefill
    prediction is; MoE experts at the slower routed product. The batch's compute roof is this rate."""
    cfg = cfg or MemoryConfig(n_gpu_layers=0)
    r = rates.cpu
    width = info.n_embd / (info.n_embd + PREFILL_WIDTH) if info.n_embd else 1.0
    seconds = 0.0
    for gtype, g in weight_groups(info, cfg, has_gpu=False)["cpu"].items():
        mm = r.prefill_rate(gtype) * width
        dense = g.elements - g.expert_elements + g.expert_elements / MOE_PREFILL_EFFICIENCY
        seconds += 2 * dense / mm if mm else 0.0
    return seconds


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
