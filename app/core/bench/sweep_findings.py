"""A sweep's measurements analysed into points and one finding, per kind of sweep (the list in
app.core.bench.sweeps): which phase dominates a grid cell and where prefill starts to dominate, how decode falls
with depth, the best micro-batch, thread count and offload, and the KV variants against the first. Pure Python."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.bench.sweeps import Measurement


def nice(x: float) -> str:
    """A rounded number for a sentence: 2 significant digits (~900, ~1,200, ~45)."""
    if not math.isfinite(x) or x <= 0:
        return "?"
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    r = round(x / step) * step
    return f"{r:,.0f}" if r >= 10 else f"{r:.2g}"


def grid_cells(ms: list[Measurement]) -> list[dict[str, Any]]:
    """One dict per (prompt, gen) cell: prefill_ms, decode_ms, total_ms, dominant phase."""
    pp = {m.step.n_prompt: m for m in ms if m.step.n_prompt and not m.step.n_gen and not m.step.n_depth}
    cells = []
    for m in ms:
        s = m.step
        if s.n_gen and not s.n_prompt and s.n_depth in pp:  # local: tgG @ dP after ppP
            p, g, pre, dec = s.n_depth, s.n_gen, pp[s.n_depth].ms, m.ms
        elif s.n_gen and s.n_prompt and m.model_info.get("prefill_samples_ns"):  # remote: one request
            p, g = s.n_prompt, s.n_gen
            pre = statistics.fmean(m.model_info["prefill_samples_ns"]) / 1e6
            dec = m.ms
        else:
            continue
        cells.append({"n_prompt": p, "n_gen": g, "prefill_ms": pre, "decode_ms": dec, "total_ms": pre + dec,
                      "prefill_share": pre / (pre + dec) if pre + dec > 0 else math.nan,
                      "dominant": "prefill" if pre > dec else "decode"})
    cells.sort(key=lambda c: (c["n_gen"], c["n_prompt"]))
    return cells


def crossover(cells: list[dict[str, Any]], n_gen: int) -> tuple[float | None, bool]:
    """Prompt length where prefill time equals decode time for `n_gen`-token answers.

    Linear interpolation between the two measured prompt lengths that bracket the sign change; when
    no pair does, a linear extrapolation from the end the crossover lies beyond (flagged True)."""
    row = sorted((c for c in cells if c["n_gen"] == n_gen), key=lambda c: c["n_prompt"])
    if not row:
        return None, False
    diff = [(c["n_prompt"], c["prefill_ms"] - c["decode_ms"]) for c in row]
    # Prefill time grows with the prompt much faster than decode time (only its KV depth grows), so the
    # crossover is where the difference turns from negative to positive; the first such change counts.
    for (p0, d0), (p1, d1) in zip(diff, diff[1:], strict=False):
        if d0 <= 0 < d1:
            return p0 + (0 - d0) * (p1 - p0) / (d1 - d0), False
    if len(diff) >= 2 and (all(d < 0 for _, d in diff) or all(d > 0 for _, d in diff)):
        (p0, d0), (p1, d1) = (diff[-2], diff[-1]) if diff[-1][1] < 0 else (diff[0], diff[1])
        if d1 > d0:
            p_star = p0 + (0 - d0) * (p1 - p0) / (d1 - d0)
            if p_star > 0:
                return p_star, True
    return None, False


def _grid(ms: list[Measurement]) -> tuple[list[dict[str, Any]], str, dict[str, float] | None]:
    cells = grid_cells(ms)
    if not cells:
        return [], "Not enough measurements for a finding.", None
    gens = sorted({c["n_gen"] for c in cells})
    g = min(gens, key=lambda x: abs(math.log(x / 100)))  # the answer length closest to a typical 100 tokens
    p_star, extrapolated = crossover(cells, g)
    row = [c for c in cells if c["n_gen"] == g]
    big = max(row, key=lambda c: c["n_prompt"])
    pre_tps = big["n_prompt"] / (big["prefill_ms"] / 1000.0)
    dec_tps = g / (big["decode_ms"] / 1000.0)
    rates = f" (prefill ≈ {pre_tps:,.0f} tok/s, decode ≈ {dec_tps:,.1f} tok/s)"
    if p_star is not None and not extrapolated:
        finding = (f"On this machine, prompts over ~{nice(p_star)} tokens with {g}-token answers are "
                   f"prefill-dominated; shorter ones are decode-dominated{rates}.")
        odd = [c["n_prompt"] for c in row if (c["n_prompt"] > p_star) != (c["dominant"] == "prefill")]
        if odd:
            finding += (f" Caution: the cells at {', '.join(map(str, odd))} tokens disagree with that split, so "
                        "the machine was probably busy; repeat with more repetitions.")
    elif all(c["dominant"] == "decode" for c in row):
        tail = (f"; a linear extrapolation puts the crossover near ~{nice(p_star)} tokens"
                if p_star is not None else "")
        finding = (f"On this machine, {g}-token answers are decode-dominated for every prompt measured, up to "
                   f"{big['n_prompt']} tokens{tail}{rates}.")
    elif all(c["dominant"] == "prefill" for c in row):
        finding = (f"On this machine, even {row[0]['n_prompt']}-token prompts with {g}-token answers are "
                   f"prefill-dominated{rates}.")
    else:
        finding = (f"The measurements for {g}-token answers do not show one crossover (prefill dominates at "
                   f"{', '.join(str(c['n_prompt']) for c in row if c['dominant'] == 'prefill')} tokens only): "
                   f"the machine was probably busy; repeat with more repetitions{rates}.")
    cross = {"n_gen": float(g), "n_prompt": float(p_star), "extrapolated": float(extrapolated)} \
        if p_star is not None else None
    return cells, finding, cross


def _series(ms: list[Measurement], key: Callable[[Measurement], Any], prefill: bool) -> list[tuple[Any, float]]:
    return [(key(m), m.tps) for m in ms if (m.step.n_prompt > 0) == prefill]


def _depth(ms: list[Measurement]) -> tuple[list[dict[str, Any]], str, None]:
    pts = [{"n_depth": m.step.n_depth, "n_gen": m.step.n_gen, "decode_tps": m.tps, "ms": m.ms} for m in ms]
    pts.sort(key=lambda p: p["n_depth"])
    if len(pts) < 2:
        return pts, "Not enough measurements for a finding.", None
    a, b = pts[0], pts[-1]
    change = 100.0 * (b["decode_tps"] / a["decode_tps"] - 1.0)
    return pts, (f"Decode runs at {a['decode_tps']:.1f} tok/s with {a['n_depth']} tokens in the KV cache and "
                 f"{b['decode_tps']:.1f} tok/s at {b['n_depth']} ({change:+.0f} %): every token reads the whole "
                 "cache filled so far."), None


def _ubatch(ms: list[Measurement]) -> tuple[list[dict[str, Any]], str, None]:
    pts: list[dict[str, Any]] = [{"n_ubatch": int(m.step.config_dict.get("n_ubatch", 0)),
                                  "n_prompt": m.step.n_prompt, "prefill_tps": m.tps} for m in ms]
    pts.sort(key=lambda p: p["n_ubatch"])
    if not pts:
        return pts, "Not enough measurements for a finding.", None
    best = max(pts, key=lambda p: p["prefill_tps"])
    worst = min(pts, key=lambda p: p["prefill_tps"])
    return pts, (f"Prefill of {best['n_prompt']} tokens is fastest with n_ubatch = {best['n_ubatch']} "
                 f"({best['prefill_tps']:,.0f} tok/s); n_ubatch = {worst['n_ubatch']} is slowest "
                 f"({worst['prefill_tps']:,.0f} tok/s, "
                 f"{100 * (worst['prefill_tps'] / best['prefill_tps'] - 1):+.0f} %)."
                 ), None


def _both_phases(ms: list[Measurement], key: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                           list[dict[str, Any]]]:
    """(points, those with a prefill, those with a decode) of a sweep over one load setting `key`: one point per
    value, holding its prefill and decode tok/s (NaN where one was not measured)."""
    by: dict[int, dict[str, Any]] = {}
    for m in ms:
        value = int(m.step.config_dict.get(key, 0))
        p = by.setdefault(value, {key: value, "prefill_tps": math.nan, "decode_tps": math.nan})
        p["prefill_tps" if m.step.n_prompt else "decode_tps"] = m.tps
    pts = [by[v] for v in sorted(by)]
    return (pts, [p for p in pts if math.isfinite(p["prefill_tps"])],
            [p for p in pts if math.isfinite(p["decode_tps"])])


def _threads(ms: list[Measurement]) -> tuple[list[dict[str, Any]], str, None]:
    pts, pre, dec = _both_phases(ms, "n_threads")
    if not pre or not dec:
        return pts, "Not enough measurements for a finding.", None
    bp = max(pre, key=lambda p: p["prefill_tps"])
    bd = max(dec, key=lambda p: p["decode_tps"])
    return pts, (f"Prefill is fastest with {bp['n_threads']} thread(s) ({bp['prefill_tps']:,.0f} tok/s) and "
                 f"decode with {bd['n_threads']} ({bd['decode_tps']:.1f} tok/s)."), None


def _offload(ms: list[Measurement]) -> tuple[list[dict[str, Any]], str, None]:
    pts, pre, dec = _both_phases(ms, "n_gpu_layers")
    if len(dec) < 2 or not pre:
        return pts, "Not enough measurements for a finding.", None
    lo, hi = dec[0], dec[-1]
    bp = max(pre, key=lambda p: p["prefill_tps"])
    return pts, (f"Decode goes from {lo['decode_tps']:.1f} tok/s with {lo['n_gpu_layers']} layers on the GPU to "
                 f"{hi['decode_tps']:.1f} with {hi['n_gpu_layers']} ({hi['decode_tps'] / lo['decode_tps']:.2f}×); "
                 f"prefill is fastest with {bp['n_gpu_layers']} ({bp['prefill_tps']:,.0f} tok/s)."), None


def kv_label(cfg: dict[str, Any]) -> str:
    return f"K {cfg.get('type_k', 'f16')}/V {cfg.get('type_v', 'f16')}, FA {'on' if cfg.get('flash_attn') else 'off'}"


def _kv(ms: list[Measurement]) -> tuple[list[dict[str, Any]], str, None]:
    by: dict[str, dict[str, Any]] = {}
    for m in ms:
        cfg = m.step.config_dict
        label = kv_label(cfg)
        p = by.setdefault(label, {"variant": label, "type_k": cfg.get("type_k"), "type_v": cfg.get("type_v"),
                                  "flash_attn": bool(cfg.get("flash_attn")), "prefill_tps": math.nan,
                                  "decode_tps": math.nan, "decode_depth": 0})
        if m.step.n_prompt:
            p["prefill_tps"] = m.tps
        else:
            p["decode_tps"], p["decode_depth"] = m.tps, m.step.n_depth
    pts = list(by.values())
    if len(pts) < 2 or not all(math.isfinite(p["decode_tps"]) and math.isfinite(p["prefill_tps"]) for p in pts):
        return pts, "Not enough measurements for a finding.", None
    base = pts[0]
    parts = []
    for p in pts[1:]:
        parts.append(f"{p['variant']}: prefill {100 * (p['prefill_tps'] / base['prefill_tps'] - 1):+.0f} %, "
                     f"decode {100 * (p['decode_tps'] / base['decode_tps'] - 1):+.0f} %")
    best = max(pts, key=lambda p: p["decode_tps"])
    return pts, (f"Against {base['variant']} — " + "; ".join(parts) +
                 f" (decode at depth {base['decode_depth']}); fastest decode: {best['variant']}."), None


# The analysis of each kind: (points, finding, crossover) from its measurements.
ANALYSES: dict[str, Callable[[list[Measurement]], tuple[list[dict[str, Any]], str, Any]]] = {
    "grid": _grid, "depth": _depth, "ubatch": _ubatch, "threads": _threads, "kv": _kv, "offload": _offload}
