"""The compute buffers of llama.cpp's Vulkan backend, device and CPU side, at any offload level.

llama.cpp's scheduler offloads every op with a batch of at least 32 rows to the device even when its weight lives
in host memory (a layer left on the CPU, experts kept in RAM): each such weight opens a split of its own and is
copied into the device's compute buffer at its start, freed when the split ends. The buffer is a best-fit
dynamic allocator, so what a partial offload adds is not only the copy but the hole it leaves: a freed copy next
to a freed hidden state makes a gap that the layer's next big tensor (the attention scores, the FFN's gated
product) cannot fit in, so that tensor goes above it. Checked against the buffer logs of a real Vulkan device
(tests/core/predict/test_memory_on_gpu.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.gguf.info import GGUFInfo
    from app.core.predict.memory import KVCache, MemoryConfig

F32 = 4
I64 = 8
OFFLOAD_MIN_BATCH = 32  # ggml-vulkan's offload_op: smaller batches of host-weight ops stay on the CPU
MIN_CPU_COMPUTE = 8 << 20


def _largest(info: GGUFInfo, layer: int, suffixes: tuple[str, ...]) -> int:
    """The biggest of one block's weights named blk.<layer>.<suffix>.weight (0 if it has none)."""
    names = {f"blk.{layer}.{s}.weight" for s in suffixes}
    return max((t.n_bytes for t in info.tensors if t.name in names), default=0)


def vulkan_compute(info: GGUFInfo, cfg: MemoryConfig, peaks: dict[str, int], caches: list[KVCache], n_ubatch: int,
                   on_gpu: list[bool], experts_on_host: list[bool], output_on_gpu: bool,
                   output_refused: bool) -> tuple[int, int]:
    """(device, CPU) compute buffers of llama.cpp's Vulkan backend.

    With every layer on the device a layer's peak is the larger of attention and FFN. Attention without flash
    attention: the KQ scores (twice when the model soft-caps them: gemma-2's capped scores sit beside the raw
    ones in the measured buffer), a mask and four hidden states. The FFN at its gated product: the up, gate and
    product tensors (FFN-wide; for a MoE, as wide as the experts used) with the residual and normed input and the
    device's masks (f16 with flash attention).

    A layer whose weights stay in host memory runs on the device all the same (its prompt batch is >= 32 rows),
    one split per weight: before its peak op the last copied weight (the largest of Q/K/V before the scores, of
    gate/up before the FFN product) is freed with the normed hidden state beside it, and that gap cannot hold
    the scores or product, so the peak grows by both. A MoE block with its experts in host memory peaks in the
    down-projection's split: the copy of a whole expert tensor (all experts: the copy is allocated in full) with
    the gated product and the per-expert outputs (n_embd x experts used) live, over three hidden states and
    the masks; from the device layers' first split on, the i64 indices their cache writes use (one per token
    for K, one per token and V element for a transposed V cache, i.e. without flash attention) are live too.

    The CPU keeps the f32 masks it builds for the device's splits and a hidden state (at least 8 MiB while layers
    run on the CPU too); the logits sit on whichever side multiplies the output. With no layer offloaded a
    prompt batch's output product still runs on the device, its weight copied beside them."""
    hid = F32 * n_ubatch * info.n_embd
    kv_len = max((c.cells for c in caches), default=0)
    n_head = max(info.n_head, default=0)
    n_ff = info.n_ff
    n_ff_exp = n_ff
    if info.is_moe:
        n_ff_exp = int(info.metadata.get(f"{info.architecture}.expert_feed_forward_length") or n_ff)
        n_ff = n_ff_exp * max(info.expert_used_count, 1)
    flash = cfg.type_v not in ("f16", "f32", "bf16") if cfg.flash_attn is None else cfg.flash_attn
    soft_cap = 2 if info.metadata.get(f"{info.architecture}.attn_logit_softcapping") else 1
    device_masks = sum(c.cells * n_ubatch * (2 if flash else F32) for c in caches)
    if flash:
        attention = peaks["attention"]
    else:
        attention = F32 * kv_len * n_ubatch * (n_head * soft_cap + 1) + 4 * hid
    ffn = 3 * F32 * n_ubatch * n_ff + 2 * hid + device_masks
    layer = max(attention, ffn)
    v_row = max((info.kv_row_elements(il)[1] for il in range(info.n_layers)), default=0)
    write_idxs = sum(I64 * n_ubatch * (1 + (1 if flash else v_row)) for _ in caches)  # K and V rows to write
    n_gpu = sum(on_gpu)
    if n_ubatch >= OFFLOAD_MIN_BATCH:
        for il, here in enumerate(on_gpu):
            if not here:
                if attention >= ffn:
                    gap = _largest(info, il, ("attn_q", "attn_k", "attn_v"))
                else:
                    gap = _largest(info, il, ("ffn_gate", "ffn_up"))
                layer = max(layer, (attention if attention >= ffn else ffn) + hid + gap)
            if info.is_moe and (experts_on_host[il] or not here):
                copy = _largest(info, il, ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"))
                experts_out = F32 * n_ubatch * info.n_embd * max(info.expert_used_count, 1)
                moe = copy + F32 * n_ubatch * n_ff + experts_out + 3 * hid + device_masks
                # the device layers' cache-write indices are live from their first split on: in a device
                # layer, or in the last host layer, whose down-projection split runs on into the device layers
                if here or (il + 1 < len(on_gpu) and on_gpu[il + 1]):
                    moe += write_idxs
                layer = max(layer, moe)
    masks = 4 * F32 * kv_len * n_ubatch
    out_name = "token_embd.weight" if info.tied_output else "output.weight"
    out_bytes = next((t.n_bytes for t in info.tensors if t.name == out_name), 0)
    if n_gpu == 0 and not output_on_gpu:
        gpu = max(layer, 0 if output_refused else peaks["logits"] + out_bytes)
    else:
        gpu = max(layer, peaks["logits"] if output_on_gpu else 0)
    full = n_gpu == info.n_layers and output_on_gpu
    cpu = (peaks["logits"] if not output_on_gpu and (n_gpu or output_refused)
           else masks + (hid if full else max(hid, MIN_CPU_COMPUTE)))
    return gpu, cpu
