"""KV cache types: which ones Roofline offers, and their sizes.

The engine, the command line (`--kv-type`, `-ctk/-ctv`), the settings and the recommender offer the same
three types: f16 (exact), q8_0 (about half the memory) and q4_0 (about a quarter, some quality loss).
The memory estimator also sizes the other types llama.cpp accepts; their block sizes come from the `gguf`
package (GGML_QUANT_SIZES), so they cannot drift from llama.cpp.
"""

from __future__ import annotations

from typing import Literal, get_args

KvType = Literal["f16", "q8_0", "q4_0"]
KV_TYPES: tuple[str, ...] = get_args(KvType)  # what Roofline offers, most exact first
DEFAULT_KV_TYPE: KvType = "f16"
KV_TYPE_LABELS: dict[str, str] = {
    "f16": "f16 (exact)", "q8_0": "q8_0 (about half the memory)", "q4_0": "q4_0 (about a quarter; some quality loss)",
}
# every type llama.cpp accepts for its KV cache (the estimator sizes them all)
LLAMA_KV_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")


def ggml_name(kv_type: str) -> str:
    """'q8_0' -> 'Q8_0': the ggml tensor type name."""
    return kv_type.upper()


def block_size(kv_type: str) -> tuple[int, int]:
    """(elements per block, bytes per block) of a KV cache type; ValueError for one llama.cpp does not accept."""
    if kv_type not in LLAMA_KV_TYPES:
        raise ValueError(f"unknown KV cache type {kv_type!r}; use one of {', '.join(LLAMA_KV_TYPES)}")
    import gguf  # here, not at the top: the command line imports this module just for the names above

    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[ggml_name(kv_type)]]
    return block, type_size
