"""What one token's attention over the KV cache touches, per layer: the cells each layer's cache holds (a
sliding-window layer's capped), the K and V bytes read and the weight-equivalents of its products. The speed
model (`speed`, at `rates.ATTENTION_READ_SLOWDOWN` on the CPU) and the batching model (`batching`) price them;
this module only counts them.
"""

from __future__ import annotations

from app.core.gguf.info import GGUFInfo
from app.core.gguf.kv_types import LLAMA_KV_TYPES, ggml_name
from app.core.predict.memory import CTX_PAD, MemoryConfig, kv_caches, pad, row_bytes


def layer_cells(info: GGUFInfo, cfg: MemoryConfig) -> list[int]:
    """Each layer's KV cache size in cells (0: no cache, a recurrent layer)."""
    n_ctx = pad(cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train, CTX_PAD)
    n_ubatch = min(cfg.n_ubatch, cfg.n_batch)
    cells = [0] * info.n_layers
    for c in kv_caches(info, n_ctx, cfg.type_k, cfg.type_v, n_ubatch, cfg.swa_full, cfg.n_seq):
        for il in c.layers:
            cells[il] = c.cells
    return cells


def attention_weights(info: GGUFInfo, il: int, span: float) -> float:
    """Weight-equivalents of attention for one token over `span` cached tokens: every query head takes a
    dot product with each K row and weights each V row (GQA heads share rows but not the products)."""
    heads = info.n_head[il] if info.n_head else 0
    return heads * (info.head_dim_k + info.head_dim_v) * span


def attention_at(info: GGUFInfo, cfg: MemoryConfig, span: float, layers: list[int] | None = None,
                 cells: list[int] | None = None) -> tuple[float, float]:
    """(KV bytes read, attention weight-equivalents) of one token attending `span` cached cells in each of
    `layers` (all when None), each layer's span capped by its cache's size (a sliding-window layer's)."""
    cells = cells if cells is not None else layer_cells(info, cfg)
    kv_bytes = kv_w = 0.0
    for il in range(info.n_layers) if layers is None else layers:
        k_el, v_el = info.kv_row_elements(il)
        s = min(span, cells[il])
        kv_bytes += (row_bytes(k_el, cfg.type_k) + row_bytes(v_el, cfg.type_v)) * s if k_el else 0
        kv_w += attention_weights(info, il, s)
    return kv_bytes, kv_w


def prefill_span(info: GGUFInfo, il: int, n_prompt: int, depth: int) -> float:
    """The mean number of cells a prompt token attends in layer `il`, `depth` tokens already cached."""
    span = depth + n_prompt / 2
    if info.swa_layers[il] and info.sliding_window:
        span = min(span, info.sliding_window)
    return span


def kv_type_name(cfg: MemoryConfig) -> str:
    """The ggml type attention's products run in: the K cache's (f16 unless quantized)."""
    return ggml_name(cfg.type_k) if cfg.type_k in LLAMA_KV_TYPES else "F16"
