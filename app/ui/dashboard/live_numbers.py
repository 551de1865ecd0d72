"""The dashboard's numbers that are known before a reply ends.

Prefill is over at the first token: the engine sends its rate, the prompt's new/reused split and the KV
cache filled so far with it (`P.Prefilled`), so the Prefill and Prompt-tokens cards show final values
then, not at the end. During the reply the KV cache grows by one cell per decoded token: the card and
the memory bar follow the tokens as they stream (prompt + tokens so far), using the bytes each cell adds
that the engine reported. The reply's final Done/Stats numbers replace these estimates. Also the KV note
for sliding-window models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.metrics.phase import PhaseMetrics, fmt_bytes, fmt_duration
from app.engine import protocol as P

NOT_RESTORED = "saved KV not used (why: hover)"  # the Prompt-tokens card's short line; the tooltip has the reason


@dataclass
class LiveKV:
    cells_used: int
    cells_allocated: int
    bytes_used: int
    bytes_allocated: int
    n_ctx: int

    @property
    def headroom(self) -> int:
        return max(self.n_ctx - self.cells_used, 0)


def prefill_texts(ev: P.Prefilled) -> tuple[tuple[str, str], tuple[str, str, str]]:
    """((value, detail) of the Prefill card, (value, detail, tooltip) of the Prompt-tokens card)."""
    reused = max(ev.prompt_tokens - ev.prefill_tokens, 0)
    if ev.prefill_tokens > 0 and ev.prefill_ms > 0:
        prefill = (f"{ev.prefill_tps:,.0f} tok/s", f"{ev.prefill_tokens:,} tok in {fmt_duration(ev.prefill_ms)}")
    else:
        prefill = ("—", "nothing new to evaluate")
    restored = PhaseMetrics(kv_restored_tokens=ev.restored_tokens, kv_restore_ms=ev.restore_ms,
                            kv_restore_prefill_ms=ev.restore_prefill_ms).restore_text()
    return prefill, (f"{ev.prompt_tokens:,}", *prompt_detail(ev.prompt_tokens - reused, reused, restored,
                                                           ev.restore_note))


def prompt_detail(new: int, reused: int, restored: str, note: str) -> tuple[str, str]:
    """The Prompt-tokens card's line and its tooltip: new vs reused, and a saved KV cache restored from disk (or
    why not). Why not is a sentence ("saved KV of this chat not used: it was made with context size 4096, the
    model is loaded with 2048; prefilled instead"): more than a narrow card's three lines, it was cut there.
    The card says that it was not used, its tooltip says why."""
    if restored:
        line = f"{new:,} new · {restored}"
        return line, line
    line = f"{new:,} new · {reused:,} reused"
    if not note:
        return line, line
    return f"{line} · {NOT_RESTORED}", f"{line} · {note}"


def live_kv(ev: P.Prefilled, n_tokens: int, loaded: P.Loaded) -> LiveKV:
    """The KV cache after `n_tokens` reply tokens: the first came out of the prefill, and every later one
    is a decode step that stored its predecessor, so the cache holds prompt + n_tokens - 1 cells."""
    grown = max(n_tokens - 1, 0)
    cells = min(ev.kv_cells_used + grown, loaded.kv_cells_allocated or loaded.n_ctx)
    used = min(int(ev.kv_bytes_used + grown * ev.kv_bytes_per_cell), loaded.kv_bytes_allocated or 1 << 62)
    return LiveKV(cells, loaded.kv_cells_allocated, used, loaded.kv_bytes_allocated, loaded.n_ctx)


def kv_texts(kv: LiveKV, type_k: str, type_v: str) -> tuple[str, str, str]:
    """(card value, card detail, memory label) for a live KV cache."""
    label = (f"{fmt_bytes(kv.bytes_used)} used of {fmt_bytes(kv.bytes_allocated)} allocated "
             f"({type_k}/{type_v}) · headroom {kv.headroom:,} tokens of {kv.n_ctx:,} · growing live")
    return f"{kv.cells_used:,} tok", f"{kv.headroom:,} tokens free · live", label


def show_kv(kv: LiveKV, loaded: P.Loaded, card: Any, bar: Any, label: Any) -> None:
    """Put a live KV cache on the dashboard's card, bar and label."""
    value, detail, text = kv_texts(kv, loaded.type_k, loaded.type_v)
    card.set(value, detail)
    label.setText(text)
    bar.setRange(0, max(kv.cells_allocated, 1))
    bar.setValue(min(kv.cells_used, max(kv.cells_allocated, 1)))
    bar.setFormat(f"{kv.cells_used} / {kv.cells_allocated} cells")


def swa_note(loaded: P.Loaded) -> str:
    """A line under the KV bar when the model slides its attention window, and which cache it got."""
    window = None
    for key, value in loaded.metadata.items():
        if key.endswith("attention.sliding_window"):
            try:
                window = int(value)
            except ValueError:
                pass
    if not window:
        return ""
    kind = "full-size cache (every layer keeps all n_ctx cells)" if loaded.swa_full else \
        "sliding layers keep only the window"
    return (f"Sliding-window attention: most layers only look back {window} tokens; "
            f"{kind}.")
