"""Quantization types: bits per weight and measured quality cost, in one table.

Bits per weight: where a file type is named after one ggml tensor type (Q8_0, Q6_K, IQ3_S, ...), it is that
type's block size from the `gguf` package (GGML_QUANT_SIZES: bytes per block of elements), so it cannot drift
from llama.cpp. Mixes (Q4_K_M, Q3_K_L, IQ3_M, ...) keep sensitive tensors at wider types, so their value is the
typical bits/weight of whole files of that type, written here by hand.

Quality: mean KL divergence of the token distribution vs F16 on Llama-3-8B, from llama.cpp's perplexity
scoreboard (F16 perplexity 6.233). Only types on the scoreboard have a value here; app.core.predict.quality
interpolates the others on bits/weight and marks them as estimates.
"""

from __future__ import annotations

import gguf

# file types whose weights are mostly one ggml type but that keep some tensors wider: typical file bits/weight
# (Q2_K too: llama.cpp's Q2_K files keep attention and output tensors at wider types)
MIX_BITS: dict[str, float] = {
    "Q6_K_L": 6.7, "Q5_K_M": 5.7, "Q5_K_S": 5.5, "Q4_K_M": 4.9, "Q4_K_S": 4.6, "Q4_K_L": 5.0,
    "Q3_K_L": 4.3, "Q3_K_M": 3.9, "Q3_K_S": 3.5, "Q3_K_XL": 4.4, "IQ3_M": 3.7, "IQ3_XS": 3.3,
    "Q2_K": 3.2, "Q2_K_S": 2.9, "Q2_K_L": 3.4, "IQ2_M": 2.7,
}
# file types that are one ggml type throughout (bits/weight from its block size)
PURE_TYPES: tuple[str, ...] = (
    "F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_1", "Q5_0", "Q4_1", "Q4_0", "IQ4_NL", "IQ4_XS", "MXFP4",
    "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S", "TQ1_0", "TQ2_0",
)
# What `roofline quantize` and the Quantize dialog offer. IQ1/IQ2 types need an importance matrix (llama.cpp
# refuses without one): not offered.
QUANTIZE_TARGETS: tuple[str, ...] = (
    "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_M", "Q4_K_S", "Q4_1", "Q4_0",
    "IQ4_NL", "IQ4_XS", "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q2_K", "F16", "BF16",
)
# mean KL divergence vs F16, llama.cpp perplexity scoreboard, Llama-3-8B
KLD: dict[str, float] = {
    "F32": 0.0, "F16": 0.0, "BF16": 0.0,
    "Q8_0": 0.0014, "Q6_K": 0.0055, "Q5_K_M": 0.011, "Q4_K_M": 0.031, "Q4_K_S": 0.043, "IQ4_XS": 0.036,
    "Q4_0": 0.072, "Q3_K_M": 0.10, "Q3_K_S": 0.23, "Q2_K": 0.45, "IQ2_M": 0.33, "IQ1_S": 2.2,
}
PPL_DELTA_PCT: dict[str, float] = {"F32": 0.0, "F16": 0.0, "BF16": 0.0, "Q4_K_M": 2.8, "Q2_K": 56.0}


def block_bits(ggml_type: str) -> float:
    """Bits per weight of one ggml tensor type, from its block size (Q4_K: 144 bytes per 256 -> 4.5)."""
    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[ggml_type.upper()]]
    return 8 * type_size / block


BITS: dict[str, float] = {**{t: block_bits(t) for t in PURE_TYPES}, **MIX_BITS}


def bits_per_weight(file_type: str) -> float | None:
    """Typical bits/weight of a file of this type ('UD-' dynamic variants count as their base), or None."""
    return BITS.get(file_type.upper().removeprefix("UD-"))
