"""How much memory llama.cpp will allocate for a model, per device, before loading it.

Mirrors the llama.cpp shipped with llama-cpp-python 0.3.36 (checked against its source and its own
buffer-size log lines, see tests/core/predict/test_memory_estimate.py):

* weights: layer `il` goes to the GPU when il >= n_layer + 1 - n_gpu_layers; the output layer counts
  as layer n_layer, so it is the first thing offloaded (any n_gpu_layers >= 1) and n_gpu_layers =
  n_layer leaves block 0 on the CPU; full offload is n_layer + 1 (or -1). The input embedding always
  stays on the CPU; a tied output matrix is duplicated onto the GPU when the output layer is there.
  The CPU backend keeps an extra "CPU_REPACK" copy, in an interleaved layout, of the matrices whose type it
  has kernels for on this CPU (app.core.predict.repack: Q4_0/Q4_K/IQ4_NL/MXFP4 with AVX2, Q2_K with AVX-512,
  more on ARM). A tied output matrix in such a type gets its own repacked copy (the embedding lookup keeps the
  plain one). With mmap the CPU weights are one mapping of the file spanning the tensors that stay there
  (`mapped_span`); read into memory (no mmap) the CPU buffer holds only the tensors that are not repacked, so a
  Q4_K_M model takes its repacked share less (a 1B: 1054 vs 1490 MiB).
* KV cache (exact): n_ctx is padded to a multiple of 256; each layer stores K and V rows of
  head_dim * n_head_kv(il) elements per cell; full-attention layers have n_ctx cells, sliding-window
  layers pad(min(n_ctx, n_swa * n_seq + n_ubatch), 256) unless the full-size SWA cache is requested
  (llama-cpp-python's default). A quantized V cache needs flash attention.
* compute buffer: llama.cpp reserves the worst-case graph (a full micro-batch) and reuses memory
  between ops, so the buffer is the largest of three peaks: the logits (n_vocab x n_ubatch f32, which
  dominates small models with big vocabularies), attention (without flash attention the KQ matrix
  n_ctx x n_ubatch x n_head f32 plus the masks) and the feed-forward activations.
* recurrent state (app.core.predict.recurrent): llama.cpp's "RS buffer", a fixed block per sequence for every
  short-convolution or Mamba layer of a hybrid, with its layer's device; such layers have no KV cache.
* output buffer: the logits kept for the caller, n_vocab x 4 bytes per sequence, on the CPU.
* with a GPU device in use (`gpu_present`, or layers offloaded), llama.cpp keeps the CPU side's weights in the
  device's pinned host buffer ("Vulkan_Host", "CUDA_Host") ahead of the CPU's repacking buffer, so nothing is
  repacked; a weight the device will not multiply (bigger than its `gpu_max_matrix`: a Vulkan device's storage
  buffer range, 128 MiB on Mesa's llvmpipe) stays on the CPU even in an offloaded layer — a tied output included,
  whose logits then come from the CPU; and with no layer offloaded the output's product still runs on the device
  for a prompt batch (its weight copied into the device's compute buffer beside the logits).
* MoE expert placement (`n_cpu_moe`, llama.cpp's `--n-cpu-moe N`): the expert matrices of blocks 0..N-1 stay in
  a plain CPU buffer (not repacked) while the rest of those blocks is offloaded; their KV stays with the block.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from app.core.config.defaults import DEFAULT_N_CTX
from app.core.gguf.facts import TensorInfo
from app.core.gguf.info import GGUFInfo
from app.core.gguf.kv_types import block_size
from app.core.predict.device_compute import vulkan_compute
from app.core.predict.recurrent import recurrent_layers, state_bytes_per_layer
from app.core.predict.repack import host_features, repacked

MiB = 1 << 20
CTX_PAD = 256  # llama.cpp pads n_ctx (and the SWA cache) to a multiple of 256


def pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def row_bytes(n_elements: int, kv_type: str) -> int:
    """Bytes of one row of n elements in a KV cache type (f16: 2n, q8_0: 34n/32, q4_0: 18n/32)."""
    block, size = block_size(kv_type)
    if n_elements % block:
        raise ValueError(f"KV type {kv_type} needs rows that are a multiple of {block} (got {n_elements})")
    return n_elements // block * size


@dataclass
class MemoryConfig:
    """What will be passed to llama.cpp (same names as the engine's LoadConfig)."""

    n_ctx: int = DEFAULT_N_CTX  # 0: the model's trained context
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool | None = None  # None: as the engine does: on for a quantized V cache, else off
    n_gpu_layers: int = 0  # -1: everything
    n_batch: int = 512
    n_ubatch: int = 512
    swa_full: bool = True  # llama-cpp-python's default
    n_seq: int = 1
    cpu_repack: bool = True  # the CPU backend repacks some quant types (x86 with AVX2, ARM)
    cpu_features: frozenset[str] | None = None  # whose repack rules (None: this machine's CPU)
    use_mmap: bool = False  # the engine's default (protocol.LoadConfig): weights read into memory
    n_cpu_moe: int = 0  # MoE: keep the expert matrices of the first N blocks in CPU memory
    gpu_present: bool = False  # a GPU device is in use even at n_gpu_layers 0 (host buffers, op offload)
    gpu_max_matrix: int = 0  # bytes: the largest weight the GPU multiplies (0: no limit)
    gpu_backend: str = ""  # "vulkan", "cuda", …: whose compute buffers to expect ("": the CUDA-style model)


@dataclass
class KVCache:
    """One of llama.cpp's KV caches (models with sliding windows have two: full and SWA)."""

    kind: str  # "full" | "swa"
    cells: int
    layers: list[int]
    k_bytes: int
    v_bytes: int

    @property
    def bytes(self) -> int:
        return self.k_bytes + self.v_bytes


@dataclass
class DeviceMemory:
    weights: int = 0
    repack: int = 0
    kv: int = 0
    compute: int = 0
    output: int = 0
    state: int = 0  # recurrent layers' state (llama.cpp's RS buffer)

    @property
    def total(self) -> int:
        return self.weights + self.repack + self.kv + self.compute + self.output + self.state


@dataclass
class MemoryEstimate:
    n_ctx: int  # what llama.cpp will allocate (padded)
    n_ctx_requested: int
    n_batch: int
    n_ubatch: int
    flash_attn: bool
    caches: list[KVCache]
    cpu: DeviceMemory
    gpu: DeviceMemory
    layers_on_gpu: int  # repeating layers
    output_on_gpu: bool
    notes: list[str] = field(default_factory=list)
    n_cpu_moe: int = 0  # blocks whose expert matrices stay in CPU memory

    @property
    def kv_bytes(self) -> int:
        return sum(c.bytes for c in self.caches)

    @property
    def kv_bytes_per_token(self) -> float:
        """Bytes the cache grows by per token of context (full-size caches; SWA caches stop growing)."""
        return sum(c.bytes / c.cells for c in self.caches if c.cells) if self.caches else 0.0

    @property
    def total(self) -> int:
        return self.cpu.total + self.gpu.total

    @property
    def full_offload(self) -> bool:
        return self.output_on_gpu and self.cpu.kv == 0 and self.layers_on_gpu > 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cpu"]["total"] = self.cpu.total
        data["gpu"]["total"] = self.gpu.total
        data["kv_bytes"] = self.kv_bytes
        data["total"] = self.total
        return data


EXPERT_TENSOR = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps")  # llama.cpp's LLM_FFN_EXPS_REGEX


def is_expert_tensor(name: str) -> bool:
    return EXPERT_TENSOR.search(name) is not None


def expert_stays_on_cpu(name: str, layer: int, n_cpu_moe: int) -> bool:
    """An expert matrix of one of the first `n_cpu_moe` blocks: kept in CPU memory whatever n_gpu_layers says."""
    return layer < n_cpu_moe and is_expert_tensor(name)


def gpu_layout(n_layers: int, n_gpu_layers: int, has_gpu: bool = True) -> tuple[list[bool], bool]:
    """(per repeating layer: on GPU?, output layer on GPU?) the way llama.cpp assigns them."""
    if not has_gpu or n_gpu_layers == 0:
        return [False] * n_layers, False
    k = n_layers + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layers + 1)
    start = max(n_layers + 1 - k, 0)
    return [il >= start for il in range(n_layers)], True


def kv_caches(info: GGUFInfo, n_ctx: int, type_k: str = "f16", type_v: str = "f16", n_ubatch: int = 512,
              swa_full: bool = True, n_seq: int = 1) -> list[KVCache]:
    """The KV caches llama.cpp allocates for an already padded n_ctx (exact bytes)."""
    caches = []
    swa = [il for il in range(info.n_layers) if info.swa_layers[il] and info.n_head_kv[il] > 0]
    full = [il for il in range(info.n_layers) if not info.swa_layers[il] and info.n_head_kv[il] > 0]
    groups = [("full", full, n_ctx)]
    if swa:
        cells = n_ctx if swa_full else pad(min(n_ctx, info.sliding_window * n_seq + n_ubatch), CTX_PAD)
        groups.append(("swa", swa, cells))
    for kind, layers, cells in groups:
        if not layers:
            continue
        k = sum(row_bytes(info.kv_row_elements(il)[0], type_k) for il in layers) * cells
        v = sum(row_bytes(info.kv_row_elements(il)[1], type_v) for il in layers) * cells
        caches.append(KVCache(kind, cells, layers, k, v))
    return caches


def compute_peaks(info: GGUFInfo, n_ctx: int, n_ubatch: int, flash_attn: bool,
                  caches: list[KVCache]) -> dict[str, int]:
    """The three candidate peaks of llama.cpp's compute buffer (bytes)."""
    f32 = 4
    n_head = max(info.n_head, default=0)
    # logits for every token of the micro-batch plus the final hidden states
    logits = f32 * n_ubatch * (info.n_vocab + 2 * info.n_embd)
    # attention: one mask per cache (f16 with flash attention, else f32) + the KQ scores without FA
    mask_bytes = 2 if flash_attn else 4
    masks = sum(c.cells * n_ubatch * mask_bytes for c in caches)
    kv_len = max((c.cells for c in caches), default=n_ctx)
    kq = 0 if flash_attn else f32 * kv_len * n_ubatch * n_head
    attn = kq + masks + f32 * n_ubatch * info.n_embd * (8 if flash_attn else 6)
    n_ff = info.n_ff
    if info.is_moe:
        n_ff_exp = int(info.metadata.get(f"{info.architecture}.expert_feed_forward_length") or n_ff)
        n_ff = n_ff_exp * max(info.expert_used_count, 1)
    ffn = f32 * n_ubatch * (3 * n_ff + 2 * info.n_embd)
    return {"logits": logits, "attention": attn, "ffn": ffn}


def estimate_memory(info: GGUFInfo, cfg: MemoryConfig | None = None, has_gpu: bool = True) -> MemoryEstimate:
    """Per-device memory for loading `info` with `cfg` (bytes). `has_gpu` False: a CPU-only build."""
    cfg = cfg or MemoryConfig()
    notes: list[str] = []
    requested = cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train
    if requested <= 0:
        raise ValueError("n_ctx must be positive (the model does not say its trained context)")
    n_ctx = pad(requested, CTX_PAD)
    # llama-cpp-python clamps the batch to the requested context, the micro-batch to the batch
    n_batch = min(cfg.n_batch, requested)
    n_ubatch = min(cfg.n_ubatch, n_batch)
    flash = (cfg.type_v not in ("f16", "f32", "bf16")) if cfg.flash_attn is None else cfg.flash_attn
    if cfg.type_v not in ("f16", "f32", "bf16") and not flash:
        raise ValueError(f"a {cfg.type_v} V cache needs flash attention (llama.cpp refuses it without)")
    if info.n_ctx_train and requested > info.n_ctx_train:
        notes.append(f"n_ctx {requested} is beyond the trained context {info.n_ctx_train}: quality drops")

    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    device_in_use = has_gpu and (cfg.gpu_present or cfg.n_gpu_layers != 0)
    repack = cfg.cpu_repack and not device_in_use  # the device's host buffer comes first
    features = host_features() if cfg.cpu_features is None else cfg.cpu_features
    limit = cfg.gpu_max_matrix if device_in_use else 0
    too_big = {t.name for t in info.tensors if limit and t.n_bytes > limit and len(t.shape) >= 2}
    out_name = "token_embd.weight" if info.tied_output else "output.weight"
    output_refused = out_name in too_big
    if output_refused:
        output_on_gpu = False  # its layer is offloaded, its matrix is not: the logits come from the CPU
    n_gpu = sum(on_gpu)
    cpu, gpu = DeviceMemory(), DeviceMemory()

    # weights
    cpu.weights += info.token_embd_bytes + info.other_bytes
    repackable = {il: 0 for il in range(info.n_layers)}
    kept_experts = {il: 0 for il in range(info.n_layers)}  # offloaded blocks' experts held on the CPU
    for t in info.tensors:
        if not t.name.startswith("blk."):
            continue
        il = int(t.name.split(".")[1])
        if il not in repackable:
            continue
        if on_gpu[il] and (expert_stays_on_cpu(t.name, il, cfg.n_cpu_moe) or t.name in too_big):
            kept_experts[il] += t.n_bytes
        elif is_repacked(t, features):
            repackable[il] += t.n_bytes
    for il in range(info.n_layers):
        if on_gpu[il]:
            gpu.weights += info.layer_bytes[il] - kept_experts[il]
            cpu.weights += kept_experts[il]
        else:
            cpu.weights += info.layer_bytes[il]
            if repack:
                cpu.repack += repackable[il]
    out_tensor = next((t for t in info.tensors if t.name == out_name), None)
    out_repacked = repack and out_tensor is not None and is_repacked(out_tensor, features)
    if output_on_gpu:
        gpu.weights += info.output_bytes  # a tied output is duplicated onto the GPU
    elif not info.tied_output:
        cpu.weights += info.output_bytes
        if out_repacked:
            cpu.repack += info.output_bytes
    if cfg.use_mmap:
        cpu.weights = mapped_span(info, on_gpu, output_on_gpu, repack, cfg.n_cpu_moe, features)
    else:
        cpu.weights -= cpu.repack  # read into memory: a repacked tensor is only in the REPACK buffer
    if out_repacked and info.tied_output and not output_on_gpu:
        cpu.repack += info.output_bytes  # the output's own repacked copy; the lookup keeps token_embd as it is

    # KV cache: each layer's cache lives with its layer
    caches = kv_caches(info, n_ctx, cfg.type_k, cfg.type_v, n_ubatch, cfg.swa_full, cfg.n_seq)
    for c in caches:
        for il in c.layers:
            k_el, v_el = info.kv_row_elements(il)
            layer_bytes = (row_bytes(k_el, cfg.type_k) + row_bytes(v_el, cfg.type_v)) * c.cells
            (gpu if on_gpu[il] else cpu).kv += layer_bytes

    # recurrent state: a fixed block per sequence for each recurrent layer, with its layer
    per_layer_state = state_bytes_per_layer(info, cfg.n_seq)
    for il in recurrent_layers(info):
        (gpu if on_gpu[il] else cpu).state += per_layer_state

    # compute buffers: the graph's peak, on the device that runs that part
    peaks = compute_peaks(info, n_ctx, n_ubatch, flash, caches)
    layer_peak = max(peaks["attention"], peaks["ffn"])
    hidden = 4 * n_ubatch * info.n_embd * 2
    if device_in_use and cfg.gpu_backend == "vulkan":
        experts_on_host = [on_gpu[il] and il < cfg.n_cpu_moe for il in range(info.n_layers)]
        gpu.compute, cpu.compute = vulkan_compute(info, cfg, peaks, caches, n_ubatch, on_gpu, experts_on_host,
                                                  output_on_gpu, output_refused)
    elif n_gpu == 0 and not output_on_gpu:
        cpu.compute = max(peaks["logits"], layer_peak)
    else:
        gpu.compute = max(peaks["logits"] if output_on_gpu else 0, layer_peak if n_gpu else hidden)
        cpu_layers = info.n_layers - n_gpu
        cpu.compute = max(peaks["logits"] if not output_on_gpu else 0, layer_peak if cpu_layers else 0, hidden)
    cpu.output = info.n_vocab * 4 * cfg.n_seq

    return MemoryEstimate(
        n_ctx=n_ctx, n_ctx_requested=requested, n_batch=n_batch, n_ubatch=n_ubatch, flash_attn=flash,
        caches=caches, cpu=cpu, gpu=gpu, layers_on_gpu=n_gpu, output_on_gpu=output_on_gpu, notes=notes,
        n_cpu_moe=min(cfg.n_cpu_moe, info.n_layers) if info.is_moe else 0,
    )


def is_repacked(t: TensorInfo, features: frozenset[str]) -> bool:
    """A matrix (2-D, or 3-D experts) that llama.cpp's CPU backend repacks on a CPU with `features`."""
    return len(t.shape) in (2, 3) and repacked(t.ggml_type, t.shape[1], features)


def mapped_span(info: GGUFInfo, on_gpu: list[bool], output_on_gpu: bool, cpu_repack: bool, n_cpu_moe: int = 0,
                features: frozenset[str] | None = None) -> int:
    """Bytes of llama.cpp's CPU_Mapped model buffer: one mapping from the first to the last byte of the
    tensors that stay in the mapped file on the CPU (not offloaded, not moved to the REPACK buffer).
    Repacked or offloaded tensors between two mapped ones stay inside the span; at either end they fall out
    of it (a file whose last tensors are a repacked FFN maps that much less)."""
    features = host_features() if features is None else features
    lo, hi = None, 0
    for t in info.tensors:
        il = int(t.name.split(".")[1]) if t.name.startswith("blk.") else None
        if il is not None and il < len(on_gpu):
            kept = on_gpu[il] and expert_stays_on_cpu(t.name, il, n_cpu_moe)
            if (on_gpu[il] and not kept) or (not on_gpu[il] and cpu_repack and is_repacked(t, features)):
                continue
        elif t.name == "output.weight" and (output_on_gpu or (cpu_repack and is_repacked(t, features))):
            continue
        lo = t.offset if lo is None else min(lo, t.offset)
        hi = max(hi, t.offset + t.n_bytes)
    return hi - lo if lo is not None else 0


def kv_bytes(info: GGUFInfo, n_ctx: int, type_k: str = "f16", type_v: str = "f16", n_ubatch: int = 512,
             swa_full: bool = True) -> int:
    """Total KV cache bytes at a (requested) context size."""
    return sum(c.bytes for c in kv_caches(info, pad(n_ctx, CTX_PAD), type_k, type_v, n_ubatch, swa_full))
