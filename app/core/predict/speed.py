"""Predicted prefill and decode speed from the model's bytes and FLOPs per quantization type and the
machine's rates (`app.core.predict.rates`).

Decode (one token at a time): every token multiplies every repeating-layer weight (only the active experts
of a MoE), the output matrix (the embedding is a row lookup, so it only counts when it doubles as the
output) and reads the KV cache filled so far. Per device and per ggml type, that group of weights costs the
larger of its bytes / (η · bandwidth) and its weights / the type's decode kernel rate; the KV cache is
priced apart (`attention`): on the CPU its bytes (slower than a weight's) plus its products at the KV type's
rate, added, not overlapped. Then a fixed t0 per token and a small
cost per layer (llama.cpp synchronises its threads after every graph node). The memory-/compute-bound
label comes from the model's own two sums: all groups' memory times against all groups' compute times.

Prefill (a batch of prompt tokens, in micro-batches): 2 FLOPs per weight per token at the type's matmul
rate, never faster than reading that type's weights once per micro-batch (all experts of a MoE are touched
by a 512-token batch), plus attention over the context and the output matrix once for the last token.
With a GPU device in use (layers offloaded, or a device present at n_gpu_layers 0; `host_offload`) the CPU
layers' weights sit in the device's host buffer, not repacked, so the CPU multiplies them at its plain kernels'
rates, and every micro-batch of 32 tokens or more runs on the device whole, the host weights copied to it each
time (~25 GB/s over PCIe).

`cost_parts` returns the pieces before they are added up, so `app.core.predict.calibration` can refit the
rates' scale factors to measured runs on several models without re-deriving any of this.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from app.core.gguf.info import GGUFInfo
from app.core.predict.attention import (
    attention_at,
    attention_weights,
    kv_type_name,
    layer_cells,
    prefill_span,
)
from app.core.predict.host_offload import (
    offloaded_prefill,
    offloaded_share,
    output_side,
    refused_by_device,
    unrepacked_types,
)
from app.core.predict.memory import MemoryConfig, expert_stays_on_cpu, gpu_layout, row_bytes
from app.core.predict.rates import (  # noqa: F401  (re-exported: the speed model's public names)
    ATTENTION_READ_SLOWDOWN,
    ETA_CPU,
    ETA_GPU,
    MOE_PREFILL_EFFICIENCY,
    PREFILL_WIDTH,
    T0_CPU,
    T0_GPU,
    DeviceRates,
    Rates,
    default_rates,
    width_factor,
)


@dataclass
class Group:
    """Weights of one ggml type on one device: bytes read and weights multiplied per token."""

    bytes: float = 0.0  # per decode step (active experts only)
    elements: float = 0.0  # multiplied per token (active experts only)
    bytes_all: float = 0.0  # touched by a large prompt batch (every expert)
    expert_elements: float = 0.0  # the part of `elements` in MoE experts (active ones)
    rows: float = 0.0  # output rows of its matrix products per token (dense weights only)


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
class Parts:
    """One device's time for a token (decode) or a prompt (prefill), before scale factors:
    Σ max(mem / bw_scale, alu / (alu_scale × type scale)) + attention / alu_scale + t0 × t0_count
    + t_layer × layer_count, with mem at the device's bandwidth and alu at its compute rates; `types` names
    each group's ggml type (the cache's: its K type) so a calibration can scale one type's kernels alone."""

    mem: list[float] = field(default_factory=list)
    alu: list[float] = field(default_factory=list)
    attention: float = 0.0  # prefill attention products at the device's attention rate
    t0_count: float = 0.0  # how many per-token overheads this time includes
    layer_count: float = 0.0  # how many per-layer overheads (layers × tokens or micro-batches)
    types: list[str] = field(default_factory=list)  # each group's ggml type (empty: not said)

    def time(self, bw_scale: float = 1.0, alu_scale: float = 1.0, t0: float = 0.0, t_layer: float = 0.0,
             type_scales: dict[str, float] | None = None) -> float:
        ts = type_scales or {}
        kinds = self.types or [""] * len(self.mem)
        return (sum(max(m / bw_scale, a / (alu_scale * ts.get(k, 1.0)))
                    for m, a, k in zip(self.mem, self.alu, kinds, strict=True))
                + self.attention / alu_scale + t0 * self.t0_count + t_layer * self.layer_count)

    def alu_share(self) -> dict[str, float]:
        """Each type's share of the compute time (a calibration scales a type's kernels from the runs it
        dominates)."""
        total = sum(self.alu) + self.attention
        out: dict[str, float] = {}
        for a, k in zip(self.alu, self.types, strict=False):
            out[k] = out.get(k, 0.0) + (a / total if total else 0.0)
        return out

    def sums(self) -> tuple[float, float]:
        """(all memory time, all compute time): the model's own two times."""
        return sum(self.mem), sum(self.alu)


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
    decode_memory_s: float = 0.0  # the two times the label compares (summed over devices)
    decode_compute_s: float = 0.0
    threads: int = 0  # the CPU threads the prediction is for (0: not said)

    @property
    def label(self) -> str:
        return "calibrated" if self.calibrated else "uncalibrated"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["label"] = self.label
        return data


# ------------------------------------------------------------------------------------------ bytes, FLOPs


def _layer_of(name: str) -> int | None:
    return int(name.split(".")[1]) if name.startswith("blk.") else None


def weight_groups(info: GGUFInfo, cfg: MemoryConfig, has_gpu: bool = True) -> dict[str, dict[str, Group]]:
    """device → ggml type → Group: the weights a token reads and multiplies (norms and biases are read only)."""
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    share = info.expert_used_count / info.expert_count if info.is_moe and info.expert_used_count else 1.0
    out_name = "token_embd.weight" if info.tied_output else "output.weight"
    groups: dict[str, dict[str, Group]] = {"cpu": {}, "gpu": {}}
    for t in info.tensors:
        il = _layer_of(t.name)
        refused = refused_by_device(t, cfg, has_gpu)
        if il is not None and il < info.n_layers:
            dev = "gpu" if on_gpu[il] and not refused and not expert_stays_on_cpu(t.name, il, cfg.n_cpu_moe) else "cpu"
        elif t.name == out_name:
            dev = "gpu" if output_on_gpu and not refused else "cpu"
        else:
            continue  # the input embedding: a row lookup
        f = share if "_exps." in t.name else 1.0
        g = groups[dev].setdefault(t.ggml_type, Group())
        g.bytes += t.n_bytes * f
        g.elements += t.n_elements * f if len(t.shape) >= 2 else 0  # norms, biases: read, barely computed
        g.bytes_all += t.n_bytes
        if "_exps." in t.name and len(t.shape) >= 2:
            g.expert_elements += t.n_elements * f
        elif len(t.shape) >= 2 and t.shape[0]:
            g.rows += t.n_elements / t.shape[0]  # a product's rows: everything past the row length
    return groups


def decode_traffic(info: GGUFInfo, cfg: MemoryConfig, depth: int, has_gpu: bool = True) -> Traffic:
    """Bytes read by one decode step with `depth` tokens already in the KV cache."""
    on_gpu, _ = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    traffic = Traffic()
    for dev, groups in weight_groups(info, cfg, has_gpu).items():
        traffic.weights[dev] = sum(g.bytes for g in groups.values())
    cells = layer_cells(info, cfg)
    for il in range(info.n_layers):
        k_el, v_el = info.kv_row_elements(il)
        if not k_el:
            continue
        row = row_bytes(k_el, cfg.type_k) + row_bytes(v_el, cfg.type_v)
        traffic.kv["gpu" if on_gpu[il] else "cpu"] += row * min(depth, cells[il])
    return traffic


def decode_flops(info: GGUFInfo, cfg: MemoryConfig, depth: int, has_gpu: bool = True) -> dict[str, float]:
    """FLOPs of one decode step per device: 2 per multiplied weight plus attention over `depth` tokens."""
    on_gpu, _ = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    cells = layer_cells(info, cfg)
    out = {dev: 2 * sum(g.elements for g in groups.values())
           for dev, groups in weight_groups(info, cfg, has_gpu).items()}
    for il in range(info.n_layers):
        out["gpu" if on_gpu[il] else "cpu"] += 2 * attention_weights(info, il, min(depth, cells[il] or depth))
    return out


def prefill_flops(info: GGUFInfo, n_prompt: int, depth: int = 0) -> tuple[float, list[float]]:
    """(total FLOPs to process n_prompt tokens after `depth` cached ones, per-layer share of them)."""
    layer_el = [0.0] * info.n_layers
    share = info.expert_used_count / info.expert_count if info.is_moe and info.expert_used_count else 1.0
    out_name = "token_embd.weight" if info.tied_output else "output.weight"
    out_el = float(info.n_vocab * info.n_embd)
    for t in info.tensors:
        il = _layer_of(t.name)
        if il is not None and il < info.n_layers and len(t.shape) >= 2:
            layer_el[il] += t.n_elements * (share if "_exps." in t.name else 1.0)
        elif t.name == out_name:
            out_el = float(t.n_elements)
    per_layer = [n_prompt * (2 * p + 2 * attention_weights(info, il, prefill_span(info, il, n_prompt, depth)))
                 for il, p in enumerate(layer_el)]
    return sum(per_layer) + 2 * out_el, per_layer  # logits for the last token only


# ------------------------------------------------------------------------------------------ time parts


def cost_parts(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, depth: int = 0, n_prompt: int = 0
               ) -> dict[str, Parts]:
    """device → Parts of one decode step at `depth` (n_prompt 0) or of an n_prompt-token prefill."""
    has_gpu = rates.gpu is not None
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    devices = {"cpu": rates.cpu} | ({"gpu": rates.gpu} if rates.gpu is not None else {})
    groups = weight_groups(info, cfg, has_gpu)
    cells = layer_cells(info, cfg)
    n_ub = -(-n_prompt // max(min(cfg.n_ubatch, cfg.n_batch), 1)) if n_prompt else 0
    parts = {dev: Parts() for dev in devices}
    out_name = "token_embd.weight" if info.tied_output else "output.weight"
    out_t = next((t for t in info.tensors if t.name == out_name), None)
    plain = unrepacked_types(cfg, has_gpu)  # in a device's host buffer: the CPU's plain kernels
    for dev, r in devices.items():
        p = parts[dev]
        bw = r.effective_bandwidth
        # element-wise work around each matmul (norms, rope, activations, copies) grows with the width only:
        # a narrow model's matmuls reach a smaller share of the kernels' rate
        width = width_factor(info.n_embd) if dev == "cpu" else 1.0
        for gtype, g in groups[dev].items():
            p.types.append(gtype)
            packed = dev != "cpu" or gtype not in plain
            if n_prompt:
                out_el = out_t.n_elements if out_t is not None and out_t.ggml_type == gtype and \
                    (output_on_gpu == (dev == "gpu")) else 0
                rate = r.prefill_rate(gtype, packed) * width
                p.mem.append(n_ub * g.bytes_all / bw)
                # the output matrix: logits for the last token only, a matrix-vector product
                out_rate = r.decode_rate(gtype, packed)
                out_t_s = out_el / out_rate if out_rate else 2 * out_el / rate
                # MoE experts: each multiplies only the tokens routed to it (mul_mat_id), a slower product
                dense = g.elements - g.expert_elements - out_el + g.expert_elements / MOE_PREFILL_EFFICIENCY
                p.alu.append(2 * dense * n_prompt / rate + out_t_s if rate else 0.0)
            else:
                rate = r.decode_rate(gtype, packed)
                p.mem.append(g.bytes / bw)
                p.alu.append(g.elements / rate if rate else 0.0)
        layers = [il for il in range(info.n_layers) if on_gpu[il] == (dev == "gpu")]
        if n_prompt:
            attn = sum(2 * n_prompt * attention_weights(info, il, prefill_span(info, il, n_prompt, depth))
                       for il in layers)
            p.attention = attn / r.prefill_flops
            p.t0_count, p.layer_count = n_ub, n_ub * len(layers)
        else:
            kv_bytes, kv_w = attention_at(info, cfg, depth, layers, cells)
            rate = r.decode_rate(kv_type_name(cfg))
            if dev == "cpu":  # the cache's reads and its products added, the reads slower (rates.py)
                p.types += [kv_type_name(cfg)] * 2  # attention runs at that type's rate: one scale for both
                p.mem += [kv_bytes * ATTENTION_READ_SLOWDOWN / bw, 0.0]
                p.alu += [0.0, kv_w / rate if rate else 0.0]
            else:
                p.types.append(kv_type_name(cfg))
                p.mem.append(kv_bytes / bw)
                p.alu.append(kv_w / rate if rate else 0.0)
            p.t0_count, p.layer_count = 1.0, len(layers)
    return parts


# ------------------------------------------------------------------------------------------ predictions


def predict(info: GGUFInfo, rates: Rates, cfg: MemoryConfig | None = None, depth: int = 0,
            n_prompt: int = 512, n_gen: int = 1) -> SpeedPrediction:
    """Predicted decode tok/s (averaged over n_gen tokens from `depth`) and prefill tok/s (n_prompt)."""
    cfg = cfg or MemoryConfig()
    has_gpu = rates.gpu is not None
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    gpu_used = has_gpu and (any(on_gpu) or output_on_gpu)
    mean_depth = round(depth + max(n_gen - 1, 0) / 2)
    traffic = decode_traffic(info, cfg, mean_depth, has_gpu)
    dparts = cost_parts(info, rates, cfg, depth=mean_depth)
    used = ["cpu"] + (["gpu"] if gpu_used else [])
    if gpu_used and traffic.on("cpu") == 0:
        used = ["gpu"]  # everything on the GPU: the CPU only samples
    devices: dict[str, DeviceRates] = {"cpu": rates.cpu} | ({"gpu": rates.gpu} if rates.gpu is not None else {})
    overhead = max(devices[d].t0_s for d in used) + sum(devices[d].t_layer_s * dparts[d].layer_count for d in used)
    stream = overhead
    t_mem = t_alu = 0.0
    for d in used:
        stream += dparts[d].time()
        m, a = dparts[d].sums()
        t_mem, t_alu = t_mem + m, t_alu + a

    total_flops, _ = prefill_flops(info, n_prompt, depth)
    prefill_t, compute_t, read_t, offloaded = _prefill_times(info, rates, cfg, n_prompt, depth, used)
    used += ["gpu"] if offloaded and "gpu" not in used else []  # its rates priced the prompt
    calibrated = all(devices[d].calibrated for d in used)
    return SpeedPrediction(
        decode_tps=1.0 / stream,
        prefill_tps=n_prompt / prefill_t if prefill_t > 0 else float("inf"),
        decode_s_per_token=stream,
        bytes_per_token=traffic.total,
        bytes_per_token_by_device={k: traffic.on(k) for k in ("cpu", "gpu")},
        prefill_flops_per_token=total_flops / n_prompt if n_prompt else 0.0,
        decode_bound=("per-token overhead" if overhead > max(t_mem, t_alu) else
                      "compute" if t_alu > t_mem else "memory bandwidth"),
        prefill_bound="compute" if compute_t >= read_t else "memory bandwidth",  # copies to the device count too
        calibrated=calibrated, depth=depth, decode_memory_s=t_mem, decode_compute_s=t_alu,
        threads=rates.cpu.threads,
    )


def _prefill_times(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, n_prompt: int, depth: int,
                   used: list[str]) -> tuple[float, float, float, int]:
    """(seconds, compute seconds, read seconds, tokens the device took whole) of an n_prompt-token prefill after
    `depth` cached ones: the micro-batches llama.cpp hands the device whole, host layers included
    (`host_offload`), at its rates plus the host weights' copies; the rest on the `used` devices, layer by layer."""
    devices = {"cpu": rates.cpu} | ({"gpu": rates.gpu} if rates.gpu is not None else {})
    big, n_big = offloaded_share(n_prompt, cfg, rates.gpu is not None)
    t = c = r = 0.0
    if big and rates.gpu is not None:
        moe = (info.expert_used_count, info.expert_count) if info.is_moe else (0, 0)
        flops = sum(prefill_flops(info, big, depth)[1])  # the layers' (the output's product is apart)
        t, c, r = offloaded_prefill(rates.gpu, rates.cpu, weight_groups(info, cfg), flops, big, n_big, info.n_layers,
                                    moe, output_side(info, cfg), big == n_prompt, unrepacked_types(cfg, True))
    if big < n_prompt or not big:
        parts = cost_parts(info, rates, cfg, depth=depth + big, n_prompt=n_prompt - big)
        t += sum(parts[d].time(t0=devices[d].t0_s, t_layer=devices[d].t_layer_s) for d in used)
        c += sum(sum(parts[d].alu) + parts[d].attention for d in used)
        r += sum(sum(parts[d].mem) for d in used)
    return t, c, r, big


def offload_curve(info: GGUFInfo, rates: Rates, cfg: MemoryConfig | None = None,
                  depth: int = 0) -> list[tuple[int, float]]:
    """What-if: predicted decode tok/s for every n_gpu_layers from 0 to full offload."""
    cfg = cfg or MemoryConfig()
    return [(k, predict(info, rates, replace(cfg, n_gpu_layers=k), depth=depth).decode_tps)
            for k in range(info.n_layers + 2)]
