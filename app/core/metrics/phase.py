"""Phase metrics of one generation: prefill and decode kept apart, never blended into one tok/s.

Rates come from llama.cpp's own perf counters (compute time only); TTFT and inter-token latency come
from wall-clock timestamps taken in the engine, so what the user feels sits beside what the kernels did.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method); NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def rate(tokens: int, ms: float) -> float:
    return tokens / (ms / 1000.0) if ms > 0 and tokens > 0 else 0.0


@dataclass
class PhaseMetrics:
    # prompt side
    prompt_tokens: int = 0  # tokens in the templated prompt
    reused_tokens: int = 0  # of those, already in the KV cache (not evaluated again)
    prefill_tokens: int = 0  # evaluated as prompt batches (llama.cpp n_p_eval delta)
    prefill_ms: float = 0.0  # llama.cpp t_p_eval delta (compute only)
    ttft_ms: float = 0.0  # wall clock: request received -> first token text available
    # decode side
    decode_tokens: int = 0  # single-token evaluations (llama.cpp n_eval delta)
    decode_ms: float = 0.0  # llama.cpp t_eval delta
    generated_tokens: int = 0  # tokens sampled and returned
    itl_ms: list[float] = field(default_factory=list)  # wall-clock gaps between consecutive tokens
    decode_wall_ms: float = 0.0  # first token -> last token, wall clock
    total_ms: float = 0.0
    # memory
    kv_cells_used: int = 0
    kv_cells_allocated: int = 0
    kv_bytes_used: int = 0
    kv_bytes_allocated: int = 0
    rss_bytes: int = 0
    load_ms: float = 0.0
    # speculative decoding (prompt lookup or a draft model)
    draft_tokens: int = 0
    draft_accepted: int = 0
    drafter: str = ""  # what proposed the drafts: "prompt lookup" or "draft model" ("" when none ran)
    # a chat's KV cache loaded from disk instead of prefilled (app.core.chat.saved_kv)
    kv_restored_tokens: int = 0
    kv_restore_ms: float = 0.0
    kv_restore_prefill_ms: float = 0.0  # what prefilling those tokens would have taken (estimate)
    kv_restore_note: str = ""  # why a saved state was not used
    source: str = "llama.cpp perf counters"  # or "client-side wall clock" for remote backends

    @property
    def prefill_tps(self) -> float:
        return rate(self.prefill_tokens, self.prefill_ms)

    @property
    def prefill_short(self) -> str:
        """The prefill rate in a few words; a prompt found whole in the cache evaluated nothing, so has none."""
        return f"prefill {self.prefill_tps:.0f} tok/s" if self.prefill_tokens > 0 else "prompt cached"

    @property
    def decode_tps(self) -> float:
        return rate(self.decode_tokens, self.decode_ms)

    @property
    def decode_wall_tps(self) -> float:
        # n tokens have n-1 gaps between them
        return rate(self.generated_tokens - 1, self.decode_wall_ms)

    @property
    def itl_p50(self) -> float:
        return percentile(self.itl_ms, 50)

    @property
    def itl_p95(self) -> float:
        return percentile(self.itl_ms, 95)

    @property
    def itl_p99(self) -> float:
        return percentile(self.itl_ms, 99)

    @property
    def draft_acceptance(self) -> float:
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else math.nan

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("prefill_tps", "decode_tps", "decode_wall_tps", "itl_p50", "itl_p95", "itl_p99"):
            value = getattr(self, name)
            data[name] = None if math.isnan(value) else value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseMetrics:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def summary_lines(self, drafter: str | None = None) -> list[str]:
        """Human summary for the CLI and tooltips: the two phases on separate lines. `drafter` names what
        proposed the draft tokens ("prompt lookup" or "draft model"); by default the one the engine recorded."""
        drafter = drafter or self.drafter or "prompt lookup"

        def fmt(v: float, unit: str = "") -> str:
            return "n/a" if math.isnan(v) else f"{v:.1f}{unit}"

        if self.source.startswith("client-side"):
            return self._remote_summary_lines(fmt)
        new = self.prompt_tokens - self.reused_tokens
        evaluated = (f"{self.prefill_tokens} tok in {self.prefill_ms:.1f} ms = {self.prefill_tps:.1f} tok/s"
                     if self.prefill_tokens > 0 else "nothing evaluated")  # the same prompt again, kept whole
        lines = [
            f"prefill : {evaluated}  (prompt {self.prompt_tokens} tok: {new} new, {self.reused_tokens} reused "
            "from cache)",
            f"TTFT    : {self.ttft_ms:.1f} ms (wall clock)",
            f"decode  : {self.decode_tokens} tok in {self.decode_ms:.1f} ms = {self.decode_tps:.1f} tok/s"
            f"  (wall {self.decode_wall_tps:.1f} tok/s)",
            f"ITL     : p50 {fmt(self.itl_p50, ' ms')}  p95 {fmt(self.itl_p95, ' ms')}"
            f"  p99 {fmt(self.itl_p99, ' ms')}  ({len(self.itl_ms)} gaps)",
            f"KV cache: {self.kv_cells_used}/{self.kv_cells_allocated} cells, "
            f"{fmt_bytes(self.kv_bytes_used)} used of {fmt_bytes(self.kv_bytes_allocated)} allocated",
            f"engine  : RSS {fmt_bytes(self.rss_bytes)}, model load {self.load_ms:.0f} ms",
        ]
        lines += self.restore_lines()
        if self.draft_tokens:
            label = "draft   " if drafter == "draft model" else "lookup  "
            lines.append(f"{label}: {self.draft_accepted}/{self.draft_tokens} draft tokens accepted "
                         f"({100 * self.draft_acceptance:.0f} %, {drafter})")
        return lines

    def restore_text(self) -> str:
        """"restored N tokens in X ms (prefill would take ~Y ms)", or "" when no saved KV was loaded."""
        if not self.kv_restored_tokens:
            return ""
        text = f"restored {self.kv_restored_tokens} tokens in {self.kv_restore_ms:.0f} ms"
        if self.kv_restore_prefill_ms > 0:
            text += f" (prefill would take ~{self.kv_restore_prefill_ms:.0f} ms)"
        return text

    def restore_lines(self) -> list[str]:
        if self.kv_restored_tokens:
            return [f"saved KV: {self.restore_text()}"]
        return [f"saved KV: {self.kv_restore_note}"] if self.kv_restore_note else []

    def _remote_summary_lines(self, fmt: Any) -> list[str]:
        """A remote server's kernels are invisible: say what was measured at the client, and no more."""
        prompt = f"{self.prompt_tokens} tok (server's count)" if self.prompt_tokens else "not reported by the server"
        return [
            f"TTFT    : {self.ttft_ms:.1f} ms (client-side: network + queueing + the server's prefill)",
            f"prompt  : {prompt}",
            f"decode  : {self.decode_tokens} tok in {self.decode_wall_ms:.1f} ms = "
            f"{self.decode_wall_tps:.1f} tok/s (client-side, as chunks arrived)",
            f"ITL     : p50 {fmt(self.itl_p50, ' ms')}  p95 {fmt(self.itl_p95, ' ms')}"
            f"  p99 {fmt(self.itl_p99, ' ms')}  ({len(self.itl_ms)} gaps)",
            "server  : KV cache and memory are not visible from a remote client",
        ]


def fmt_duration(ms: float) -> str:
    """A duration for the dashboard's cards: milliseconds up to 10 s ("912 ms", "9,870 ms"), seconds past that
    ("12.0 s" rather than "12040 ms"), with thousands separators as the context line's "4,096"."""
    return f"{ms:,.0f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
