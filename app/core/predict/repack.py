"""Which weights llama.cpp's CPU backend copies into its "CPU_REPACK" buffer, per instruction set.

The rules of `ggml_repack_get_optimal_repack_type` (ggml/src/ggml-cpu/repack.cpp, the llama.cpp vendored by
llama-cpp-python 0.3.36): a matrix multiplied by MUL_MAT (2-D) or MUL_MAT_ID (3-D experts) on the CPU is repacked
into an interleaved layout when its type has a kernel for the CPU's features and its row count (ggml's ne[1]) is
a multiple of the interleave. Embedding lookups (GET_ROWS) are never repacked, norms and biases are F32.

x86:  Q4_0, Q4_K, IQ4_NL, MXFP4 with AVX2 (rows % 8); Q2_K with AVX-512 (rows % 8).
ARM:  with NEON + dot product: Q4_0, IQ4_NL, MXFP4, Q8_0, Q1_0 (rows % 4), Q4_K, Q5_K, Q6_K (rows % 8); the same
      set with int8 matrix multiply (I8MM) instead; Q4_0 also with 256-bit SVE + I8MM (rows % 8).
The features are ggml's compile-time ones; the wheel is built for the machine it runs on (GGML_NATIVE), so the
host CPU's flags stand for them. SVE's vector length is not in /proc/cpuinfo: SVE counts as shorter than 256 bits,
which only matters for a Q4_0 matrix whose rows are a multiple of 4 but not of 8 (then NEON's kernel takes it).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

# (type, features that must all be present, row multiple), tried in order as repack.cpp does
_RULES: tuple[tuple[str, frozenset[str], int], ...] = tuple(
    (t, frozenset(need), rows) for t, need, rows in (
        ("Q4_0", {"AVX2"}, 8), ("Q4_0", {"SVE256", "I8MM"}, 8), ("Q4_0", {"NEON", "I8MM"}, 4),
        ("Q4_0", {"NEON", "DOTPROD"}, 4),
        ("Q4_K", {"AVX2"}, 8), ("Q4_K", {"NEON", "I8MM"}, 8), ("Q4_K", {"NEON", "DOTPROD"}, 8),
        ("Q2_K", {"AVX512F"}, 8),
        ("Q5_K", {"NEON", "I8MM"}, 8), ("Q5_K", {"NEON", "DOTPROD"}, 8),
        ("Q6_K", {"NEON", "I8MM"}, 8), ("Q6_K", {"NEON", "DOTPROD"}, 8),
        ("IQ4_NL", {"AVX2"}, 8), ("IQ4_NL", {"NEON", "DOTPROD"}, 4),
        ("MXFP4", {"AVX2"}, 8), ("MXFP4", {"NEON", "DOTPROD"}, 4),
        ("Q8_0", {"NEON", "I8MM"}, 4), ("Q8_0", {"NEON", "DOTPROD"}, 4),
        ("Q1_0", {"NEON", "I8MM"}, 4), ("Q1_0", {"NEON", "DOTPROD"}, 4),
    )
)
X86_AVX2 = frozenset({"AVX2", "FMA", "F16C"})  # the common desktop/laptop x86 (what estimates assume off-host)


def repacked(ggml_type: str, rows: int, features: Iterable[str]) -> bool:
    """Whether a CPU-resident matrix of `ggml_type` with `rows` rows (ne[1]) gets a repacked copy."""
    have = set(features)
    return any(t == ggml_type and need <= have and rows % mult == 0 for t, need, mult in _RULES)


def repacked_types(features: Iterable[str]) -> frozenset[str]:
    """The types repacked on a CPU with `features` (for rows that are a multiple of 8)."""
    have = set(features)
    return frozenset(t for t, need, _ in _RULES if need <= have)


@lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    """This machine's CPU features as named in app.core.predict.hardware (AVX2, NEON, DOTPROD, I8MM ...)."""
    from app.core.predict.hardware import probe_cpu

    try:
        return frozenset(probe_cpu().features)
    except OSError:
        return X86_AVX2
