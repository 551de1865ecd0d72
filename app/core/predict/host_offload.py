"""What a GPU device in use does to the layers llama.cpp leaves on the CPU (n_gpu_layers 0 or a partial offload).

From llama.cpp's loader and scheduler (the version llama-cpp-python 0.3.36 vendors):

* the CPU side's weights go to the first device's pinned host buffer ("Vulkan_Host", "CUDA_Host"): llama-model's
  `make_cpu_buft_list` puts it ahead of the CPU's repacking buffer and `select_weight_buft` takes the first that
  supports the op. So nothing is repacked (also `memory.py`): a token multiplies those weights with the CPU's plain
  kernels, whose rates `rates.UNREPACKED` relates to the repacked ones.
* `ggml_backend_sched` (op_offload, on by default) sends an op whose weight sits in a host buffer to the device when
  the device's `offload_op` wants it: Vulkan and CUDA for a batch of at least 32 rows (`GGML_OP_OFFLOAD_MIN_BATCH`;
  a matrix product's batch is its columns, the micro-batch's tokens). Each such weight is copied to the device at
  the start of its split (a MoE's experts only those the batch routes to), the split waits for the copy: a big
  micro-batch of host layers costs the weights' upload plus the device's compute, not the CPU's.
  Smaller micro-batches (and single-token decode) stay on the CPU; so does a prompt's output product, whose
  batch is the one token the logits are for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.predict.device_compute import OFFLOAD_MIN_BATCH
from app.core.predict.memory import gpu_layout
from app.core.predict.repack import host_features, repacked_types

if TYPE_CHECKING:
    from app.core.gguf.info import GGUFInfo, TensorInfo
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.rates import DeviceRates

Output = tuple[str, str, float, float]  # (device holding the output matrix, its ggml type, bytes, weights)

HOST_LINK_GBS = 25.0  # host -> device copies: about what PCIe 4.0 x16 delivers of its 32 GB/s


def device_in_use(cfg: MemoryConfig, has_gpu: bool) -> bool:
    """A GPU device takes part in the load: layers offloaded, or present (llama.cpp uses a visible device's host
    buffer and op offload even at n_gpu_layers 0)."""
    return has_gpu and (cfg.gpu_present or cfg.n_gpu_layers != 0)


def unrepacked_types(cfg: MemoryConfig, has_gpu: bool) -> frozenset[str]:
    """The ggml types whose CPU-side weights the CPU multiplies without their repacked copy: the ones llama.cpp
    would repack on this CPU, when a device's host buffer holds them instead (none without a device)."""
    if not device_in_use(cfg, has_gpu) or not cfg.cpu_repack:
        return frozenset()
    return repacked_types(host_features() if cfg.cpu_features is None else cfg.cpu_features)


def refused_by_device(t: TensorInfo, cfg: MemoryConfig, has_gpu: bool) -> bool:
    """A matrix bigger than the device in use multiplies: it stays in RAM, its layer offloaded or not (memory.py)."""
    return device_in_use(cfg, has_gpu) and bool(cfg.gpu_max_matrix) and t.n_bytes > cfg.gpu_max_matrix \
        and len(t.shape) >= 2


def output_side(info: GGUFInfo, cfg: MemoryConfig, has_gpu: bool = True) -> Output | None:
    """(device, ggml type, bytes, weights) of the output matrix (a tied embedding's), None if the model has none."""
    name = "token_embd.weight" if info.tied_output else "output.weight"
    t = next((t for t in info.tensors if t.name == name), None)
    if t is None:
        return None
    on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)[1] and not refused_by_device(t, cfg, has_gpu)
    return "gpu" if on_gpu else "cpu", t.ggml_type, float(t.n_bytes), float(t.n_elements)


def micro_batches(n_prompt: int, cfg: MemoryConfig) -> list[int]:
    """The micro-batches of an n_prompt-token prompt: batches of n_batch tokens (each a llama_decode call), each
    split into micro-batches of n_ubatch (the rest last)."""
    batch = max(cfg.n_batch, 1)
    step = max(min(cfg.n_ubatch, batch), 1)
    return [min(step, n - j) for n in (min(batch, n_prompt - i) for i in range(0, n_prompt, batch))
            for j in range(0, n, step)]


def offloaded_share(n_prompt: int, cfg: MemoryConfig, has_gpu: bool) -> tuple[int, int]:
    """(tokens, micro-batches) of a prompt whose products run on the device, host weights included; the rest (a
    micro-batch under OFFLOAD_MIN_BATCH tokens: a short prompt, a batch's tail) runs where each layer is."""
    if not device_in_use(cfg, has_gpu):
        return 0, 0
    big = [b for b in micro_batches(n_prompt, cfg) if b >= OFFLOAD_MIN_BATCH]
    return sum(big), len(big)


def experts_touched(n_tokens: int, used: int, experts: int) -> float:
    """The expected share of a MoE's experts a micro-batch of n_tokens routes to (each token picks `used` of
    `experts`): the scheduler copies only those."""
    if not experts or not used or used >= experts:
        return 1.0
    return 1.0 - (1.0 - used / experts) ** n_tokens


def upload_s(n_bytes: float) -> float:
    """Seconds to copy host weights to the device."""
    return n_bytes / (HOST_LINK_GBS * 1e9)



def offloaded_prefill(gpu: DeviceRates, cpu: DeviceRates, groups: dict[str, dict[str, Any]], layer_flops: float,
                      n_tokens: int, n_ub: int, n_layers: int, moe: tuple[int, int], output: Output | None,
                      last: bool, unrepacked: frozenset[str]) -> tuple[float, float, float]:
    """(seconds, compute seconds, read seconds) of n_tokens in n_ub micro-batches that the device computes whole:
    every layer's products (`layer_flops` in all) at its prefill rate, over its own weights (`groups`: speed.Group
    by device and type) read once per micro-batch and the host side's weights copied to it once per micro-batch
    (of a MoE's experts, `moe` = (used, experts), the share a micro-batch routes to), then, with `last`, the
    one-token output product where the output matrix is; the device's per-token and per-layer overheads per
    micro-batch. The copy and the compute run one after the other (a split waits for its inputs)."""
    used, experts = moe
    share = used / experts if experts and used else 1.0
    touched = experts_touched(round(n_tokens / max(n_ub, 1)), used, experts)
    out_dev, out_type, out_bytes, out_weights = output or ("", "", 0.0, 0.0)
    host = own = 0.0
    for dev, by_type in groups.items():
        for g in by_type.values():
            experts_all = (g.bytes_all - g.bytes) / (1.0 - share) if share < 1.0 else 0.0
            if dev == "cpu":
                host += g.bytes_all - experts_all * (1.0 - touched)
            else:
                own += g.bytes_all
    # the output's product has one column (the last token's logits): it never moves, and it runs once
    host -= out_bytes if out_dev == "cpu" else 0.0
    own -= out_bytes if out_dev == "gpu" else 0.0
    copy = n_ub * upload_s(host)
    read = n_ub * own / gpu.effective_bandwidth
    compute = layer_flops / gpu.prefill_flops if gpu.prefill_flops else 0.0
    out_read = out_compute = 0.0
    if last and out_dev:
        r = gpu if out_dev == "gpu" else cpu
        rate = r.decode_rate(out_type, out_dev == "gpu" or out_type not in unrepacked)
        out_read, out_compute = out_bytes / r.effective_bandwidth, out_weights / rate if rate else 0.0
    seconds = (copy + max(read, compute) + max(out_read, out_compute)
               + n_ub * (gpu.t0_s + gpu.t_layer_s * n_layers))
    return seconds, compute + out_compute, copy + read + out_read
