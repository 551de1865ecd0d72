"""The metadata values estimators use, read from a GGUF header with their type and range checked.

A GGUF file is untrusted input: `block_count` 2e7 in a 16 KB file once made `info` allocate 800 MB of
per-layer lists, and a string, NaN or negative `context_length` made info, recommend and models end in
tracebacks. Every value here must be a whole number (never a bool, float or string) within limits far beyond
any real model, or `GGUFError` names the key. Per-layer values may be one number or an array of them.
"""

from __future__ import annotations

from typing import Any

from app.core.gguf.errors import GGUFError

# (lowest, highest) for `{arch}.<key>`: far beyond today's largest models, far below what exhausts memory.
LIMITS: dict[str, tuple[int, int]] = {
    "block_count": (0, 4096),
    "embedding_length": (0, 1 << 20),
    "attention.head_count": (0, 1 << 16),
    "attention.head_count_kv": (0, 1 << 16),
    "attention.key_length": (0, 1 << 16),
    "attention.value_length": (0, 1 << 16),
    "feed_forward_length": (0, 1 << 24),
    "expert_feed_forward_length": (0, 1 << 24),
    "context_length": (0, 1 << 28),
    "attention.sliding_window": (0, 1 << 28),
    "attention.sliding_window_pattern": (0, 4096),
    "expert_count": (0, 1 << 16),
    "expert_used_count": (0, 1 << 16),
    "vocab_size": (0, 1 << 26),
}
PER_LAYER = {"attention.head_count", "attention.head_count_kv", "feed_forward_length",
             "attention.sliding_window_pattern"}
# llama.cpp hard-codes the sliding-window period of these architectures (every n-th layer is full attention);
# a `{arch}.attention.sliding_window_pattern` key (period or per-layer array) overrides it.
SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}


def _whole(full_key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        shown = repr(value) if not isinstance(value, str) else repr(value[:40])
        raise GGUFError(f"bad metadata value {full_key} = {shown}: expected a whole number from {lo} to {hi}")
    return value


def check_metadata(arch: str, meta: dict[str, Any]) -> None:
    """Raise `GGUFError` naming the first estimator key whose value has the wrong type or range."""
    for name, (lo, hi) in LIMITS.items():
        full = f"{arch}.{name}"
        if full not in meta or meta[full] is None:  # None: an array too long to keep (its length is known)
            continue
        value = meta[full]
        if isinstance(value, list) and name in PER_LAYER:
            for v in value:
                _whole(full, int(v) if isinstance(v, bool) else v, lo, hi)
        else:
            _whole(full, value, lo, hi)


def per_layer(value: Any, n_layers: int, default: int) -> list[int]:
    """A per-layer value (one number for all layers, or an array) spread over `n_layers`."""
    if isinstance(value, list):
        vals = [int(v) for v in value[:n_layers]]
        return vals + [vals[-1] if vals else default] * (n_layers - len(vals))
    return [int(value) if value is not None else default] * n_layers


def swa_layers(arch: str, meta: dict[str, Any], n_layers: int, n_swa: int) -> list[bool]:
    """Which layers use sliding-window attention."""
    if n_swa <= 0:
        return [False] * n_layers
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, list):  # per-layer flags: non-zero = sliding
        flags = [bool(x) for x in pattern[:n_layers]]
        return flags + [False] * (n_layers - len(flags))
    period = int(pattern) if isinstance(pattern, int) else SWA_PERIOD.get(arch, 0)
    # period 0: llama.cpp treats every layer as sliding
    return [period == 0 or il % period < period - 1 for il in range(n_layers)]
