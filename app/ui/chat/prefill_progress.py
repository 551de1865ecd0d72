"""A long prompt's prefill as it goes (the engine's P.PrefillProgress, one per n_batch chunk): on the reply
being written ("evaluating the prompt: 1,024 of 3,285 tokens · 31 % · ~12 s left") and on the dashboard's
Prefill card, instead of "waiting for token 1" for the whole prefill. The first token (P.Prefilled) puts the
reply's own header back and the card's final numbers on it.

The time left is the rate so far applied to the tokens left: each chunk attends to more cells than the one
before, so it is a slight underestimate late in a very long prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from app.engine import protocol as P

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


def fmt_left(ms: float | None) -> str:
    if ms is None:
        return "time left unknown yet"
    seconds = ms / 1000.0
    if seconds < 1:
        return "under 1 s left"
    if seconds < 90:
        return f"~{seconds:.0f} s left"
    return f"~{seconds / 60:.0f} min left"


def progress_texts(ev: P.PrefillProgress) -> tuple[str, str, str]:
    """(the reply's line, the Prefill card's value, its detail)."""
    pct = f"{100 * ev.fraction:.0f} %"
    left = fmt_left(ev.left_ms)
    line = f"evaluating the prompt: {ev.done:,} of {ev.total:,} tokens · {pct} · {left}"
    return line, pct, f"{ev.done:,} of {ev.total:,} tok · {left}"


class PrefillProgressView(QObject):
    """Connects the engine's prefill progress to the reply on screen and the dashboard."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        window.engine.prefill_progress.connect(self.on_progress)
        window.engine.prefilled.connect(self.on_prefilled)

    def _reply_widget(self) -> object | None:
        reply = self.window.session.streaming_message_id
        return self.window.message_view.widget_for(reply) if reply is not None else None

    def on_progress(self, ev: P.PrefillProgress) -> None:
        w = self.window
        if ev.request_id != w.engine.active_request:
            return  # a request that ended meanwhile
        line, value, detail = progress_texts(ev)
        widget = self._reply_widget()
        if widget is not None:
            widget.state_label.setText(line)  # type: ignore[attr-defined]
        w.dashboard.on_prefill_progress(value, detail)

    def on_prefilled(self, ev: P.Prefilled) -> None:
        widget = self._reply_widget()
        if widget is not None:
            widget._update_header()  # type: ignore[attr-defined]  # "writing…" again: tokens are coming
