"""The dashboard's cards: one titled number each (TTFT, prefill, decode, ITL, prompt tokens, KV cache), and
how a finished reply's numbers are written on them."""

from __future__ import annotations

import math

from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.core.metrics.phase import PhaseMetrics, fmt_duration, percentile
from app.ui.dashboard.card_line import CardLine
from app.ui.dashboard.live_numbers import prompt_detail
from app.ui.toolkit import theme


def fmt(v: float, digits: int = 0, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and (math.isnan(v) or v <= 0)):
        return "—"
    return f"{v:,.{digits}f}{unit}"


def fmt_ms(v: float) -> str:
    """A latency with its unit, short enough for a card: "25.3 ms", "253 ms", "2.5 s"."""
    if isinstance(v, float) and not math.isnan(v) and v >= 1000:
        return f"{v / 1000:.1f} s"
    text = fmt(v, 1 if v < 100 else 0)
    return text if text == "—" else text + " ms"


def itl_texts(gaps_ms: list[float]) -> tuple[str, str]:
    """The Inter-token latency card's (value, detail) for a reply's gaps between tokens: the value is their
    median, and the detail says so, with their mean beside it. The mean is the Decode card's time per token
    (1000 / tok/s): a median alone ("39.0 ms" beside "224 tok in 12040 ms") read as contradicting it."""
    if not gaps_ms:
        return "—", ""
    mean = sum(gaps_ms) / len(gaps_ms)
    return (fmt(percentile(gaps_ms, 50), 1, " ms"),
            f"median · mean {fmt_ms(mean)} · p95 {fmt_ms(percentile(gaps_ms, 95))} · "
            f"p99 {fmt_ms(percentile(gaps_ms, 99))}")


class Card(QFrame):
    """A titled number: the at-a-glance part of the dashboard."""

    def __init__(self, title: str, color: str | None = None, tip: str = ""):
        super().__init__()
        self.setObjectName("card")
        self.color = color
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.setSpacing(0)
        # The title and detail break into lines rather than lose words in a narrow card (card_line.py)
        self.title = CardLine(title)
        self.value = QLabel("—")
        self.detail = CardLine("")
        font = self.value.font()
        font.setPointSizeF(font.pointSizeF() * 1.45)
        font.setBold(True)
        self.value.setFont(font)
        # Let the dock be narrow: the number may be cut rather than force a horizontal scroll bar. Its height
        # is fixed: a label that grew or shrank (empty ↔ text) would re-lay out the whole dashboard, and every
        # plot resized is a full pyqtgraph redraw (~10 ms each) mid-reply.
        self.value.setMinimumWidth(1)
        self.value.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.value.setFixedHeight(self.value.fontMetrics().lineSpacing() + 2)
        for w in (self.title, self.value, self.detail):
            lay.addWidget(w)
        # A card beside a taller one in its row is as tall: its lines stay at the top, in line with that card's,
        # rather than spread over the height.
        lay.addStretch(1)
        self.setToolTip(tip)
        self.restyle()

    def restyle(self) -> None:
        c = theme.colors()
        self.setStyleSheet(f"QFrame#card {{ border: 1px solid {c.border}; border-radius: 6px; }}")
        self.title.setStyleSheet(f"color: {c.muted};")
        self.detail.setStyleSheet(f"color: {c.muted};")
        self.value.setStyleSheet(f"color: {self.color or c.text};")

    def set(self, value: str, detail: str = "", tip: str = "") -> None:
        """The number and its line; the line's tooltip is `tip` where the line is a short form of it."""
        self.value.setText(value)
        self.detail.setText(detail)
        self.detail.setToolTip(tip or detail)  # the whole line on hover, as it was set

    def add_detail(self, line: str) -> None:
        """Append `line` (when not empty) to the detail just set from a reply's PhaseMetrics: what those numbers
        do not know (thinking, drafting, a full context), from the same reply's Done.metrics."""
        if line:
            detail, tip = self.detail.text(), self.detail.toolTip()
            self.set(self.value.text(), f"{detail} · {line}" if detail else line, f"{tip} · {line}" if tip else line)


class CardGrid(QWidget):
    """The cards in as many columns as fit (3 in a wide dock, 2 or 1 in a narrow one): a card narrower than
    its detail line would cut it ("p99 2530 m")."""

    CARD_MIN_WIDTH = 165  # the widest detail line: "p95 25.3 ms · p99 253 ms"

    def __init__(self, cards: list[Card], parent: QWidget | None = None, max_columns: int = 3):
        super().__init__(parent)
        self.cards = cards
        self.max_columns = max_columns
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(6)
        self.columns = 0
        self._place(max_columns)

    def _place(self, columns: int) -> None:
        if columns == self.columns:
            return
        self.columns = columns
        for card in self.cards:
            self.grid.removeWidget(card)
        for i, card in enumerate(self.cards):
            self.grid.addWidget(card, i // columns, i % columns)
        for col in range(self.max_columns):
            self.grid.setColumnStretch(col, 1 if col < columns else 0)
        self.updateGeometry()  # more rows, more height: the dashboard must lay out again (from inside a resize)

    def resizeEvent(self, event: QResizeEvent) -> None:
        width = event.size().width()
        gap = self.grid.spacing()
        self._place(max(1, min(self.max_columns, (width + gap) // (self.CARD_MIN_WIDTH + gap))))
        super().resizeEvent(event)


def show_message(ttft: Card, prefill: Card, decode: Card, itl: Card, prompt: Card, m: PhaseMetrics | None) -> None:
    """A finished reply's numbers on the five per-message cards (dashes when there is none)."""
    if m is None:
        for card in (ttft, prefill, decode, itl, prompt):
            card.set("—", "")
        return
    # a server's own per-reply numbers name it (source "server: Ollama (…)"): "server: Ollama · 512 tok in …"
    server = m.source.split(" (", 1)[0] + " · " if m.source.startswith("server: ") else ""
    if m.source.startswith("client-side"):  # a remote server: its prefill is hidden inside TTFT
        ttft.set(fmt_duration(m.ttft_ms) if m.ttft_ms > 0 else "—", "client-side")
        prefill.set("n/a", "inside TTFT (remote)")
    else:
        ttft.set(fmt_duration(m.ttft_ms) if m.ttft_ms > 0 else "—", f"total {m.total_ms / 1000:,.1f} s")
        if m.prefill_tokens > 0:
            prefill.set(fmt(m.prefill_tps, 0, " tok/s"),
                        f"{server}{m.prefill_tokens:,} tok in {fmt_duration(m.prefill_ms)}")
        else:  # the same prompt again: its cells and first logits were kept (app.engine.llama.decoding.prefill)
            prefill.set("—", f"{server}nothing new to evaluate")
    detail = f"{server}{m.decode_tokens:,} tok in {fmt_duration(m.decode_ms)}"
    if m.draft_tokens:  # speculative decoding: how many drafted tokens the model agreed with, and whose
        who = "draft model" if m.drafter == "draft model" else "lookup"
        detail += f" · {who} {100 * m.draft_acceptance:.0f} % accepted"
    decode.set(fmt(m.decode_tps, 1, " tok/s"), detail)
    itl.set(*itl_texts(m.itl_ms))
    new = m.prompt_tokens - m.reused_tokens
    if m.source.startswith("client-side") and not m.prompt_tokens:
        prompt.set("n/a", "not reported")
    else:
        prompt.set(f"{m.prompt_tokens:,}", *prompt_detail(new, m.reused_tokens, m.restore_text(), m.kv_restore_note))
