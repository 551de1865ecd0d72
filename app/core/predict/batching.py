"""Predicted decode speed of B sequences decoded together (continuous batching), from the speed model.

One step of a batch of B decodes reads every weight once, whatever B (plus the KV cache), and does B times
the arithmetic, so the step's arithmetic intensity (FLOPs per byte read) grows about linearly with B: the
roofline's operating point moves right with B until it meets the compute roof.

How llama.cpp's CPU backend spends that arithmetic decides the curve, and it is not "B columns sharing one
pass at the matrix-matrix rate": a step of B tokens is a B-column product of every matrix, the output matrix
included (every stream needs its logits), and the kernel llama.cpp picks depends on the type and on B (below
4 columns the matrix-vector kernel once per column; the repacked GEMMs only for whole 4- or 16-column tiles;
...), so the rate per column climbs unevenly from the decode rate to the prefill rate, and each output row
costs a fixed amount per column (large for tinyBLAS at a few columns: a narrow model with short rows pays
it over fewer weights). Both are measured per type and width (speed_rates.BATCH_PER_GEMM); a step costs,
per weight type, the larger of reading its bytes and B columns of its weights and rows. On one CPU thread the
kernels, not the memory, set the pace (a Q4_K column costs about what a whole decode step does until 16
columns): batching pays little there.

Attention: the server's KV cache is unified (one pool of cells for every sequence), and llama.cpp attends
each token over all cells in use, padded to 256 (masking the other sequences'), so B streams at depth d
attend over ~B·d cells each: B queries against the same cells, a matrix product, read once per step.

    step(1) = the single-request decode prediction (app.core.predict.speed.cost_parts)
    step(B) = overheads + Σ_type max(bytes / bandwidth, B · (weights + rows · row_cost(type, B)) / rate(type, B))
              + attention(B queries over B·d cells)

Each step pays the per-token and per-layer overheads once. CPU only: the server runs on the CPU here. Pure
Python, no llama_cpp.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.gguf.info import GGUFInfo
from app.core.predict.attention import attention_at
from app.core.predict.memory import MemoryConfig
from app.core.predict.rates import width_factor
from app.core.predict.speed import (
    DeviceRates,
    Group,
    Rates,
    cost_parts,
    decode_flops,
    decode_traffic,
    weight_groups,
)

KV_PAD = 256  # llama.cpp attends over the used cells padded to this, and never fewer (llama-kv-cache.cpp)


@dataclass(frozen=True)
class BatchPoint:
    streams: int
    step_s: float
    aggregate_tps: float
    per_stream_tps: float
    intensity: float  # FLOPs per byte read in one step
    bound: str  # "memory bandwidth" | "compute"


def unified_span(streams: int, depth: int) -> int:
    """Cells each token of a B-stream step attends over in a unified KV cache: every stream's, padded."""
    used = streams * depth
    return max(KV_PAD, -(-used // KV_PAD) * KV_PAD)


def predict_batch(info: GGUFInfo, rates: Rates, streams: list[int], cfg: MemoryConfig | None = None,
                  depth: int = 0) -> list[BatchPoint]:
    """Predicted steps of each stream count, every stream `depth` tokens deep (prompt plus reply so far)."""
    cfg = cfg or MemoryConfig(n_gpu_layers=0)
    r = rates.cpu
    bw = r.effective_bandwidth
    groups = weight_groups(info, cfg, has_gpu=False)["cpu"]
    parts = cost_parts(info, Rates(r), cfg, depth=depth)["cpu"]
    overhead = r.t0_s + r.t_layer_s * parts.layer_count
    flops = decode_flops(info, cfg, depth, has_gpu=False)["cpu"]
    traffic = decode_traffic(info, cfg, depth, has_gpu=False)
    weights = traffic.weights["cpu"]
    points = []
    for b in streams:
        if b == 1:
            mem, alu = parts.mem, parts.alu  # the single-request prediction, KV at this depth last
            kv_bytes = traffic.kv["cpu"]
        else:
            mem, alu = [], []
            for gtype, g in groups.items():
                mem.append(_expert_union_bytes(info, g, b) / bw)
                alu.append(_columns_s(r, info, gtype, g, b))
            kv_bytes, kv_w = attention_at(info, cfg, unified_span(b, depth))
            mem.append(kv_bytes / bw)
            alu.append(2 * b * kv_w / r.prefill_flops if r.prefill_flops else 0.0)
        step = overhead + sum(max(m, a) for m, a in zip(mem, alu, strict=True))
        read = weights + kv_bytes
        points.append(BatchPoint(b, step, b / step, 1.0 / step, b * flops / read,
                                 "compute" if sum(alu) > sum(mem) else "memory bandwidth"))
    return points


def _columns_s(r: DeviceRates, info: GGUFInfo, gtype: str, g: Group, columns: int) -> float:
    """Seconds of `columns` columns through one type's weights: per weight and per output row at the rate
    measured for that width (speed_rates.BATCH_PER_GEMM); a type without one runs the matrix-vector kernel
    once per column below 16 columns and the matrix-matrix (prefill) rate from there. A MoE expert sees
    only the few tokens routed to it, a matrix-vector product each: the decode kernel's rate."""
    rate, row_cost = r.batch_rate(gtype, columns)
    dense = g.elements - g.expert_elements
    if not rate:
        row_cost = 0.0
        rate = r.decode_rate(gtype) if columns < 16 else r.prefill_rate(gtype) / 2 * width_factor(info.n_embd)
    seconds = columns * (dense + row_cost * g.rows) / rate if rate else 0.0
    dec = r.decode_rate(gtype) or rate
    return seconds + (columns * g.expert_elements / dec if dec else 0.0)


def _expert_union_bytes(info: GGUFInfo, g: Group, columns: int) -> float:
    """Bytes a step of `columns` tokens reads from one type's weights: the dense ones once, and every
    expert any of the tokens is routed to (each token picks its own)."""
    if not info.is_moe or not info.expert_count or not info.expert_used_count:
        return g.bytes
    share = info.expert_used_count / info.expert_count
    experts_all = (g.bytes_all - g.bytes) / (1 - share) if share < 1 else 0.0
    union = 1 - (1 - share) ** columns
    return g.bytes + (union - share) * experts_all


def fastest_column_s(info: GGUFInfo, rates: Rates, cfg: MemoryConfig | None = None) -> float:
    """Seconds per column of every weight (the output matrix included) at the width where llama.cpp's
    kernels run fastest: the batch's compute roof, the ceiling its prediction approaches."""
    cfg = cfg or MemoryConfig(n_gpu_layers=0)
    r = rates.cpu
    groups = weight_groups(info, cfg, has_gpu=False)["cpu"]
    widths = {w for table in r.batch_rates.values() for w in table} | {16}
    return min(sum(_columns_s(r, info, gtype, g, w) for gtype, g in groups.items()) / w for w in widths)


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
