"""Decode speed versus context depth: how much slower each token gets as the KV cache fills.

Every decode step reads the weights once and, in each attention layer, every K and V row cached so far and
multiplies them with each query head (`speed.predict` at a depth: on the CPU the cache's reads and its
products are two costs added, `rates.ATTENTION_READ_SLOWDOWN`). So the drop with depth depends on the
model's layer kinds: a full-attention layer's traffic grows with the depth, a sliding-window layer's stops
growing at its window, and a recurrent layer (a convolution or Mamba-2 state, no KV cache) reads the same
state at every depth. This module turns that into a curve (tok/s at depths up to the chosen context), the
drop (tok/s at D over tok/s at 0, what `scripts/bench_zoo --depth` checks against `roofline bench -d D`),
the short line the UI shows where a context is chosen, and the user's own measured points beside it
(`app.core.chat.model_usage`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.core.gguf.facts import GGUFInfo
from app.core.predict.memory import MemoryConfig
from app.core.predict.speed import Rates, predict

STEPS = (0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)  # where the curve is drawn (and up to n_ctx)


@dataclass(frozen=True)
class DepthPoint:
    depth: int  # tokens already in the KV cache
    decode_tps: float


@dataclass(frozen=True)
class LayerKinds:
    """How the layers' per-token reads grow with depth."""

    full: int  # attention over the whole context: grows with the depth
    window: int  # sliding-window attention: grows up to the window, then flat
    recurrent: int  # no KV cache (a recurrent state): flat
    window_size: int = 0

    def describe(self) -> str:
        parts = [f"{self.full} full-attention"] if self.full else []
        if self.window:
            parts.append(f"{self.window} sliding-window ({self.window_size})")
        if self.recurrent:
            parts.append(f"{self.recurrent} recurrent")
        return " + ".join(parts) + " layers"


def layer_kinds(info: GGUFInfo) -> LayerKinds:
    full = window = recurrent = 0
    for il in range(info.n_layers):
        k_el, _ = info.kv_row_elements(il)
        if not k_el:
            recurrent += 1
        elif info.sliding_window and il < len(info.swa_layers) and info.swa_layers[il]:
            window += 1
        else:
            full += 1
    return LayerKinds(full, window, recurrent, info.sliding_window if window else 0)


def decode_at(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, depth: int) -> float:
    """Predicted decode tok/s of a token written with `depth` tokens already in the cache."""
    n_ctx = max(cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train, depth)  # a what-if past the context too
    return predict(info, rates, replace(cfg, n_ctx=n_ctx), depth=depth, n_prompt=0, n_gen=1).decode_tps


def depth_steps(n_ctx: int) -> list[int]:
    """The depths to draw for a context of n_ctx: the fixed steps below it, and the full context."""
    return sorted({d for d in STEPS if d < n_ctx} | {max(n_ctx, 0)})


def depth_curve(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, depths: list[int] | None = None
                ) -> list[DepthPoint]:
    """Predicted decode tok/s at each depth (default: `depth_steps` of the config's context)."""
    n_ctx = cfg.n_ctx if cfg.n_ctx > 0 else info.n_ctx_train
    return [DepthPoint(d, decode_at(info, rates, cfg, d)) for d in (depths or depth_steps(n_ctx))]


def drop(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, depth: int) -> float:
    """tok/s at `depth` over tok/s at depth 0 (1.0: no slower)."""
    base = decode_at(info, rates, cfg, 0)
    return decode_at(info, rates, cfg, depth) / base if base > 0 else 1.0


def fmt_tokens(n: float) -> str:
    """3100 → "3.1k", 8192 → "8k", 512 → "512"."""
    if n < 1000:
        return f"{n:.0f}"
    k = n / 1024 if n % 1024 == 0 else n / 1000
    return f"{k:.0f}k" if k >= 10 or k == int(k) else f"{k:.1f}k"


def curve_line(points: list[DepthPoint], most: int = 3) -> str:
    """"at 0: 42 tok/s, at 8k: 31 tok/s, at 32k: 24 tok/s": the first point, the last and evenly between."""
    if not points:
        return ""
    if len(points) > most:
        step = (len(points) - 1) / (most - 1)
        points = [points[round(i * step)] for i in range(most)]
    return ", ".join(f"at {fmt_tokens(p.depth)}: {fmt_tps(p.decode_tps)} tok/s" for p in points)


def fmt_tps(tps: float) -> str:
    """A speed with the digits that matter: 31, 4.2."""
    return f"{tps:.1f}" if tps < 10 else f"{tps:.0f}"


def depth_summary(info: GGUFInfo, rates: Rates, cfg: MemoryConfig) -> str:
    """One line for a context field's tooltip or a model's details: the curve up to the context, and why it
    falls (or does not)."""
    points = depth_curve(info, rates, cfg)
    kinds = layer_kinds(info)
    why = "flat: no layer keeps a KV cache" if not kinds.full and not kinds.window else \
        "falls as the KV cache fills" if kinds.full else f"flat past the {fmt_tokens(kinds.window_size)} window"
    return f"decode {curve_line(points)} ({kinds.describe()}; {why})"
