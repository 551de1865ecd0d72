"""Predicted prefill and decode speed from the model's bytes and FLOPs and the machine's rates.

Decode (one token at a time) is bound by memory bandwidth: every token reads all repeating-layer
weights (active experts only for MoE), the output matrix (the embedding is a row lookup, so it only
counts when it doubles as the output) and the KV cache filled so far. Seconds per token =
Σ over devices of bytes_on_device / (η · bandwidth) + t0, where η is the share of the bandwidth
llama.cpp achieves and t0 a fixed per-token overhead (kernel launches, sampling, Python). A roofline:
on a small CPU a small model can run out of arithmetic first (2 FLOPs per weight, dequantizing each),
so a device's time is the larger of its memory time and its compute time.

Prefill (a batch of prompt tokens) is bound by compute: 2 FLOPs per weight per token for the
repeating layers, plus attention over the context, plus the output matrix once per batch (only the
last token's logits are computed). It is also never faster than reading the weights once per
micro-batch, which matters for small CPUs. With partial GPU offload llama.cpp computes big prompt batches
of the CPU-resident layers on the GPU as well, streaming their weights over PCIe (~25 GB/s).

Uncalibrated rates come from the measured bandwidth and published efficiencies (η ≈ 0.65 for CPUs,
≈ 0.9 for GPUs); `app.core.calibration` replaces them with rates fitted to measured runs. Every
prediction says which it used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from app.core.gguf_info import GGUFInfo
from app.core.memory import CTX_PAD, MemoryConfig, gpu_layout, kv_caches, pad, row_bytes

# Published efficiencies (reference.md): decode reaches ~0.65 of a CPU's read bandwidth, 0.85-0.95 of a
# GPU's theoretical bandwidth; t0 of 3-6 ms on GPUs, ~1 ms on CPUs.
ETA_CPU, T0_CPU = 0.65, 0.001
ETA_GPU, T0_GPU = 0.90, 0.004
# llama.cpp's quantized CPU matmuls reach about this share of a numpy float32 GEMM's FLOP/s: 0.6 in
# prefill (matrix-matrix), 0.2 in decode (matrix-vector, dequantizing every weight it touches).
CPU_PREFILL_OF_GEMM = 0.6
CPU_DECODE_OF_GEMM = 0.2
CPU_FLOPS_PER_CORE = 30e9  # fallback when no GEMM probe ran
# Effective prefill FLOP/s per byte/s of memory bandwidth, by GPU family (published llama.cpp pp512).
GPU_FLOPS_PER_BYTE = {"nvidia": 100.0, "amd": 60.0, "apple": 20.0}
GPU_BANDWIDTH_GUESS = {"nvidia": 400.0, "amd": 400.0, "apple": 100.0}
# With partial offload, llama.cpp runs big prompt batches of CPU-resident layers on the GPU too
# (op offload), streaming those weights over PCIe once per micro-batch.
PCIE_GBS = 25.0


@dataclass
class DeviceRates:
    device: str  # "cpu" | "gpu"
    bandwidth_gbs: float  # measured (CPU) or theoretical (GPU)
    efficiency: float  # η: share of the bandwidth decode achieves
    t0_s: float  # fixed time per token
    prefill_flops: float  # effective FLOP/s in prompt processing
    calibrated: bool = False
    # compute roof for decode (FLOP/s; 0: none). Small CPUs run out of arithmetic before bandwidth on
    # small models; a calibration folds this into the fitted effective bandwidth instead.
    decode_flops: float = 0.0
    source: str = ""

    @property
    def effective_bandwidth(self) -> float:
        """η · bandwidth in bytes/s."""
        return self.efficiency * self.bandwidth_gbs * 1e9


@dataclass
class Rates:
    cpu: DeviceRates
    gpu: DeviceRates | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Traffic:
    """Bytes one decode step reads, per device."""

    weights: dict[str, float] = field(default_factory=lambda: {"cpu": 0.0, "gpu": 0.0})
    kv: dict[str, float] = field(default_factory=lambda: {"cpu": 0.0, "gpu": 0.0})

    def on(self, device: str) -> float:
        return self.weights[device] + self.kv[device]

    @property
    def total(self) -> float:
        return self.on("cpu") + self.on("gpu")


@dataclass
class SpeedPrediction:
    decode_tps: float
    prefill_tps: float
    decode_s_per_token: float
    bytes_per_token: float
    bytes_per_token_by_device: dict[str, float]
    prefill_flops_per_token: float
    decode_bound: str  # "memory bandwidth" | "compute" | "per-token overhead"
    prefill_bound: str  # "compute" | "memory bandwidth"
    calibrated: bool
    depth: int

    @property
    def label(self) -> str:
        return "calibrated" if self.calibrated else "uncalibrated"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["label"] = self.label
        return data


# ------------------------------------------------------------------------------------------ rates


def default_rates(hw: Any, bandwidth: Any = None) -> Rates:
    """Uncalibrated rates for a machine: `hw` a HardwareInfo, `bandwidth` a BandwidthResult (or None)."""
    bw = float(getattr(bandwidth, "read_gbs", 0.0) or 0.0) or 20.0
    gemm = float(getattr(bandwidth, "gemm_gflops", 0.0) or 0.0)
    cores = (hw.cpu.physical_cores or hw.cpu.logical_cores or 1) if hw is not None else 1
    flops = CPU_PREFILL_OF_GEMM * gemm * 1e9 if gemm else CPU_FLOPS_PER_CORE * cores
    decode_flops = flops * CPU_DECODE_OF_GEMM / CPU_PREFILL_OF_GEMM
    cpu = DeviceRates("cpu", bw, ETA_CPU, T0_CPU, flops, decode_flops=decode_flops,
                      source="measured bandwidth" if bandwidth is not None else "assumed 20 GB/s")
    gpu = None
    best = hw.best_gpu if hw is not None else None
    if best is not None:
        # bandwidth unknown (an unlisted AMD card, NVML refusing): a mid-range figure, said so
        gbs = best.bandwidth_gbs or GPU_BANDWIDTH_GUESS.get(best.vendor, 300.0)
        source = f"{best.name} spec" if best.bandwidth_gbs else f"{best.name}: bandwidth unknown, assumed {gbs:.0f} GB/s"
        gpu_flops = GPU_FLOPS_PER_BYTE.get(best.vendor, 40.0) * gbs * 1e9
        gpu = DeviceRates("gpu", gbs, ETA_GPU, T0_GPU, gpu_flops, source=source)
    return Rates(cpu, gpu)


# ------------------------------------------------------------------------------------------ bytes, FLOPs


def _layer_params(info: GGUFInfo) -> list[float]:
    """Weights multiplied per token in each repeating layer (routed experts scaled to the active ones)."""
    params = [0.0] * info.n_layers
    share = info.expert_used_count / info.expert_count if info.is_moe and info.expert_used_count else 1.0
    for t in info.tensors:
        if not t.name.startswith("blk.") or len(t.shape) < 2:
            continue  # norms and biases: negligible FLOPs
        il = int(t.name.split(".")[1])
        if il < info.n_layers:
            params[il] += t.n_elements * (share if "_exps." in t.name else 1.0)
    return params


def _active_layer_bytes(info: GGUFInfo) -> list[float]:
    share = info.expert_used_count / info.expert_count if info.is_moe and info.expert_used_count else 1.0
    return [lb - eb + eb * share for lb, eb in zip(info.layer_bytes, info.expert_bytes, strict=True)]


def _output_params(info: GGUFInfo) -> float:
    name = "token_embd.weight" if info.tied_output else "output.weight"
    return float(next((t.n_elements for t in info.tensors if t.name == name), info.n_vocab * info.n_embd))


def _layer_cells(info: GGUFInfo, cfg: MemoryConfig) -> list[int]:
    n_ctx = pad(cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train, CTX_PAD)
    n_ubatch = min(cfg.n_ubatch, cfg.n_batch)
    cells = [0] * info.n_layers
    for c in kv_caches(info, n_ctx, cfg.type_k, cfg.type_v, n_ubatch, cfg.swa_full, cfg.n_seq):
        for il in c.layers:
            cells[il] = c.cells
    return cells


def decode_traffic(info: GGUFInfo, cfg: MemoryConfig, depth: int, has_gpu: bool = True) -> Traffic:
    """Bytes read by one decode step with `depth` tokens already in the KV cache."""
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    traffic = Traffic()
    for il, b in enumerate(_active_layer_bytes(info)):
        traffic.weights["gpu" if on_gpu[il] else "cpu"] += b
    traffic.weights["gpu" if output_on_gpu else "cpu"] += info.output_bytes
    cells = _layer_cells(info, cfg)
    for il in range(info.n_layers):
        k_el, v_el = info.kv_row_elements(il)
        if not k_el:
            continue
        row = row_bytes(k_el, cfg.type_k) + row_bytes(v_el, cfg.type_v)
        traffic.kv["gpu" if on_gpu[il] else "cpu"] += row * min(depth, cells[il])
    return traffic


def decode_flops(info: GGUFInfo, cfg: MemoryConfig, depth: int, has_gpu: bool = True) -> dict[str, float]:
    """FLOPs of one decode step per device: 2 per multiplied weight (the output matrix included, since
    every step computes logits) plus attention over the `depth` cached tokens."""
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    cells = _layer_cells(info, cfg)
    out = {"cpu": 0.0, "gpu": 0.0}
    for il, p in enumerate(_layer_params(info)):
        heads = info.n_head[il] if info.n_head else 0
        attn = 2 * heads * (info.head_dim_k + info.head_dim_v) * min(depth, cells[il] or depth)
        out["gpu" if on_gpu[il] else "cpu"] += 2 * p + attn
    out["gpu" if output_on_gpu else "cpu"] += 2 * _output_params(info)
    return out


def prefill_flops(info: GGUFInfo, n_prompt: int, depth: int = 0) -> tuple[float, list[float]]:
    """(total FLOPs to process n_prompt tokens after `depth` cached ones, per-layer share of them)."""
    per_layer = []
    for il, p in enumerate(_layer_params(info)):
        ctx = depth + n_prompt / 2  # mean attention span over the batch
        if info.swa_layers[il] and info.sliding_window:
            ctx = min(ctx, info.sliding_window)
        heads = info.n_head[il] if info.n_head else 0
        attn = 2 * heads * (info.head_dim_k + info.head_dim_v) * ctx
        per_layer.append(n_prompt * (2 * p + attn))
    total = sum(per_layer) + 2 * _output_params(info)  # logits for the last token only
    return total, per_layer


# ------------------------------------------------------------------------------------------ predictions


def predict(info: GGUFInfo, rates: Rates, cfg: MemoryConfig | None = None, depth: int = 0,
            n_prompt: int = 512, n_gen: int = 1) -> SpeedPrediction:
    """Predicted decode tok/s (averaged over n_gen tokens from `depth`) and prefill tok/s (n_prompt)."""
    cfg = cfg or MemoryConfig()
    has_gpu = rates.gpu is not None
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    used = {"cpu": rates.cpu}
    if has_gpu and (any(on_gpu) or output_on_gpu):
        assert rates.gpu is not None
        used["gpu"] = rates.gpu
    mean_depth = depth + max(n_gen - 1, 0) / 2
    traffic = decode_traffic(info, cfg, round(mean_depth), has_gpu)
    step_flops = decode_flops(info, cfg, round(mean_depth), has_gpu)
    stream = compute = 0.0
    t0 = 0.0
    for name, r in used.items():
        if name == "cpu" and "gpu" in used and traffic.on("cpu") == 0:
            continue  # everything on the GPU: the CPU only samples
        t_mem = traffic.on(name) / r.effective_bandwidth
        t_alu = step_flops[name] / r.decode_flops if r.decode_flops else 0.0
        stream += max(t_mem, t_alu)
        compute += t_alu if t_alu > t_mem else 0.0
        t0 = max(t0, r.t0_s)
    s_per_token = stream + t0

    # prefill: compute per device, never faster than streaming that device's weights once per micro-batch
    total_flops, per_layer = prefill_flops(info, n_prompt, depth)
    out_flops = total_flops - sum(per_layer)
    flops = {"cpu": 0.0, "gpu": 0.0}
    for il, f in enumerate(per_layer):
        flops["gpu" if on_gpu[il] else "cpu"] += f
    flops["gpu" if output_on_gpu else "cpu"] += out_flops
    n_ubatches = -(-n_prompt // max(min(cfg.n_ubatch, cfg.n_batch), 1))
    compute_t = read_t = 0.0
    if "gpu" in used and n_prompt >= 32:  # op offload: the GPU computes everything
        compute_t = (flops["cpu"] + flops["gpu"]) / used["gpu"].prefill_flops
        read_t = n_ubatches * (traffic.weights["cpu"] / (PCIE_GBS * 1e9)
                               + traffic.weights["gpu"] / used["gpu"].effective_bandwidth)
    else:
        for name, r in used.items():
            compute_t += flops[name] / r.prefill_flops
            read_t += n_ubatches * traffic.weights[name] / r.effective_bandwidth
    prefill_t = max(compute_t, read_t)
    calibrated = all(r.calibrated for r in used.values())
    return SpeedPrediction(
        decode_tps=1.0 / s_per_token,
        prefill_tps=n_prompt / prefill_t if prefill_t > 0 else float("inf"),
        decode_s_per_token=s_per_token,
        bytes_per_token=traffic.total,
        bytes_per_token_by_device={k: traffic.on(k) for k in ("cpu", "gpu")},
        prefill_flops_per_token=total_flops / n_prompt,
        decode_bound=("per-token overhead" if t0 > stream else
                      "compute" if compute > stream / 2 else "memory bandwidth"),
        prefill_bound="compute" if compute_t >= read_t else "memory bandwidth",  # PCIe counts as bandwidth
        calibrated=calibrated,
        depth=depth,
    )


def offload_curve(info: GGUFInfo, rates: Rates, cfg: MemoryConfig | None = None,
                  depth: int = 0) -> list[tuple[int, float]]:
    """What-if: predicted decode tok/s for every n_gpu_layers from 0 to full offload."""
    cfg = cfg or MemoryConfig()
    return [(k, predict(info, rates, replace(cfg, n_gpu_layers=k), depth=depth).decode_tps)
            for k in range(info.n_layers + 2)]
