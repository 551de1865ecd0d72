"""The decode card's speed-up line for speculative decoding (prompt lookup or a draft model).

The card shows how many drafted tokens were accepted (from PhaseMetrics); whether that made decoding faster
is in Done.metrics["lookup_speedup"]: plain ms/token over effective ms/token, measured in the same reply
(app.engine.llama.prompt_lookup.PromptLookup.speedup). Below 1 is a slowdown, shown as such.
"""

from __future__ import annotations

import math
from typing import Any


def speedup_line(metrics: dict[str, Any]) -> str:
    """"measured ×1.27 vs plain decode", or "" when nothing was drafted or no plain rate was known."""
    value = metrics.get("lookup_speedup")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        return ""
    if not metrics.get("draft_tokens"):
        return ""
    return f"measured ×{value:.2f} vs plain decode"
