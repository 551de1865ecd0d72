"""How much quality a quantization type costs, as a guide.

Numbers are from the llama.cpp perplexity scoreboard for Llama-3-8B (mean KL divergence of the
token distribution vs F16; F16 perplexity 6.233). Damage varies by model: Q4_K_M has KLD 0.031 on
Llama-3-8B but 0.013 on Llama-2-7B, and small models suffer more. Types missing from the scoreboard
are interpolated on bits per weight and marked as estimates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

from app.core.gguf import quant_types
from app.core.gguf.quant_types import KLD, PPL_DELTA_PCT

SOURCE = "llama.cpp perplexity scoreboard, Llama-3-8B"
CAVEAT = ("measured on Llama-3-8B; damage varies by model (Q4_K_M: KLD 0.031 there, 0.013 on Llama-2-7B) "
          "and small models suffer more")

# MXFP4 (floats) and the ternary TQ types (models trained for them) are formats of their own: their
# bits/weight says nothing about their damage, so they are not interpolated
NOT_INTERPOLATED = frozenset({"MXFP4", "TQ1_0", "TQ2_0"})
BITS = {t: b for t, b in quant_types.BITS.items() if t not in NOT_INTERPOLATED}


@dataclass
class QuantQuality:
    file_type: str
    kld: float | None  # None: unknown type
    ppl_delta_pct: float | None
    estimated: bool  # interpolated, not on the scoreboard
    grade: str  # "none" | "negligible" | "small" | "noticeable" | "large" | "severe" | "unknown"
    source: str = SOURCE
    caveat: str = CAVEAT

    def describe(self) -> str:
        if self.kld is None:
            return f"{self.file_type}: quality cost unknown"
        if self.kld == 0:
            return f"{self.file_type}: full precision (reference quality)"
        est = "≈" if self.estimated else ""
        ppl = f", perplexity +{self.ppl_delta_pct:.1f} %" if self.ppl_delta_pct is not None else ""
        return f"{self.file_type}: {self.grade} quality loss (KLD {est}{self.kld:.3g}{ppl}; {SOURCE})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grade(kld: float) -> str:
    if kld == 0:
        return "none"
    for limit, name in ((0.01, "negligible"), (0.05, "small"), (0.15, "noticeable"), (0.5, "large")):
        if kld < limit:
            return name
    return "severe"


def _anchors(file_type: str) -> list[tuple[float, float]]:
    """Scoreboard points to interpolate between: I-quants are better per bit than K-quants, and the
    legacy Q4_0 is worse, so each family uses its own points (plus the high-bit ones both share)."""
    iq = file_type.startswith("IQ")
    pts = [(BITS[t], KLD[t]) for t in KLD if t in BITS and KLD[t] > 0 and t != "Q4_0"
           and (t.startswith("IQ") == iq or BITS[t] >= 5.5)]
    return sorted(pts)


def _interpolate(file_type: str, bits: float) -> float:
    """log(KLD) is close to linear in bits/weight between scoreboard points of one family."""
    known = _anchors(file_type)
    if bits >= known[-1][0]:
        return known[-1][1]
    if bits <= known[0][0]:
        return known[0][1]
    for (b0, k0), (b1, k1) in itertools.pairwise(known):
        if b0 <= bits <= b1:
            f = (bits - b0) / (b1 - b0) if b1 > b0 else 0.0
            return math.exp(math.log(k0) + f * (math.log(k1) - math.log(k0)))
    return known[-1][1]


def quality(file_type: str) -> QuantQuality:
    ft = file_type.upper().removeprefix("UD-")
    if ft in KLD:
        k = KLD[ft]
        return QuantQuality(ft, k, PPL_DELTA_PCT.get(ft), False, grade(k))
    if ft in BITS:
        k = _interpolate(ft, BITS[ft])
        return QuantQuality(ft, round(k, 4), None, True, grade(k))
    return QuantQuality(ft, None, None, True, "unknown")
