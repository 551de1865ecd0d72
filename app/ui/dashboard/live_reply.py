"""The dashboard's reply being written: the cards while it streams (TTFT, prefill, decode, ITL, the KV cache
as it grows), followed even while another chat is shown, so that going back to its chat shows its numbers so
far at once (`resume_reply`). A part of `Dashboard` (app.ui.dashboard.view), which builds the cards and timers."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QProgressBar

from app.core.metrics.phase import fmt_duration
from app.engine import protocol as P
from app.ui.dashboard import live_numbers as dashboard_live
from app.ui.dashboard.cards import Card, itl_texts
from app.ui.engine_link.engine_qt import EngineQt


class LiveReply:
    """The live part of the dashboard; its attributes are made by `Dashboard`."""

    engine: EngineQt
    loaded: P.Loaded | None
    live_kv_changed: Any  # the Dashboard's Signal(LiveKV)
    card_ttft: Card
    card_prefill: Card
    card_decode: Card
    card_itl: Card
    card_prompt: Card
    card_kv: Card
    kv_bar: QProgressBar
    kv_label: QLabel
    _live_timer: QTimer
    _live_times: list[float]
    _prefilled: P.Prefilled | None
    _prefill_progress: tuple[str, str] | None
    _reply_started: float | None
    _live_shown: bool
    _itl_drawn_at: float
    _itl_gaps: list[float]
    _set_itl: Callable[[list[float]], None]  # the ITL histogram, drawn by Dashboard

    def resume_reply(self) -> None:
        """The shown conversation's reply is being written already (its chat was reopened, or its own row
        clicked): its numbers so far at once, from what was kept while it streamed unseen, then live on."""
        self._live_shown = True
        self._show_waiting()
        if self._reply_started is None:  # started before this dashboard saw it: TTFT only at the end
            self.card_ttft.set("…", "final at the end")
        if self._prefilled is not None:
            self._show_prefilled(self._prefilled)
        elif self._prefill_progress is not None:
            self.card_prefill.set(*self._prefill_progress)
        if self._live_times:
            self._refresh_live(first=True)

    def end_reply(self) -> None:
        """The reply being written ended (shown or not): nothing live is left to resume."""
        self._live_timer.stop()
        self._live_times = []
        self._prefilled = None
        self._prefill_progress = None
        self._reply_started = None
        self._live_shown = False

    def _show_waiting(self) -> None:
        self._set_itl([])
        for card in (self.card_ttft, self.card_prefill, self.card_decode, self.card_itl, self.card_prompt):
            card.set("…", "waiting for token 1")
        if self.loaded is not None and self.loaded.chat_template_source == "server":
            # A server sends no prefill event: its prefill stays hidden in TTFT, its cache on its machine,
            # and the prompt's size comes (if at all) with its final usage numbers.
            self.card_prefill.set("n/a", "inside TTFT (remote)")
            self.card_prompt.set("…", "reported at the end (remote)")
            self.card_kv.set("n/a", "remote server")
        else:
            self.card_kv.detail.setText("grows from token 1")

    def on_prefill_progress(self, value: str, detail: str) -> None:
        """A long prefill's share done and time left (app/ui/chat/prefill_progress.py), until token 1."""
        self._prefill_progress = (value, detail)
        if self._live_shown and self._prefilled is None:
            self.card_prefill.set(value, detail)

    def on_prefilled(self, ev: P.Prefilled) -> None:
        """The prefill phase ended (first token): its cards are final now, the KV cache starts growing."""
        self._prefilled = ev
        if self._live_shown:
            self._show_prefilled(ev)
        else:
            self._show_live_kv()

    def _show_prefilled(self, ev: P.Prefilled) -> None:
        (pv, pd), prompt = dashboard_live.prefill_texts(ev)
        self.card_prefill.set(pv, pd)
        self.card_prompt.set(*prompt)
        self._show_live_kv()

    def _show_live_kv(self) -> None:
        """The engine's cache as the reply grows it: on the card and the Memory box while its chat is shown,
        on the status bar (the engine's, whichever chat is shown) always."""
        if self._prefilled is None or self.loaded is None:
            return
        kv = dashboard_live.live_kv(self._prefilled, len(self._live_times), self.loaded)
        if self._live_shown:
            dashboard_live.show_kv(kv, self.loaded, self.card_kv, self.kv_bar, self.kv_label)
        self.live_kv_changed.emit(kv)

    def on_tokens(self, times: list[float]) -> None:
        """Live update while streaming, from the engine's token timestamps: the cards 4×/s and the histogram
        2×/s (half that where llama.cpp takes every core: app.core.chat.pacing)."""
        before = len(self._live_times)
        self._live_times.extend(times)
        if not self._live_shown:  # its chat is not on screen: kept for resume_reply, the status bar follows
            self._show_live_kv()
            return
        # Token 1 (TTFT) and token 2 (the first decode rate and gap) are shown as they come; after that the
        # cards are paced. Token 1 comes alone (the engine sends it at once), so pacing the batch with token 2
        # kept Decode and ITL at "waiting for token 1" for a whole pacing interval.
        if before < 2:
            self._refresh_live(first=before == 0)
        elif not self._live_timer.isActive():
            self._live_timer.start(self.engine.pacing.cards_ms)

    def _refresh_live(self, first: bool = False) -> None:
        if not self._live_shown:
            return
        t = self._live_times
        if first and t and self._reply_started is not None:
            # Engine timestamps share the GUI's monotonic clock (same machine): a live TTFT as seen here.
            self.card_ttft.set(fmt_duration(1000 * (t[0] - self._reply_started)), "live; final at the end")
        gaps = [1000.0 * (b - a) for a, b in itertools.pairwise(t)]
        now = time.monotonic()
        if first or now - self._itl_drawn_at >= self.engine.pacing.histogram_ms / 1000.0:
            self._itl_drawn_at = now
            self._set_itl(gaps)
        elif len(gaps) != len(self._itl_gaps) and not self._live_timer.isActive():
            self._live_timer.start()  # come back for the histogram, even if no more tokens arrive
        self._show_live_kv()
        if len(t) == 1:  # a rate and a gap need two tokens
            for card in (self.card_decode, self.card_itl):
                card.set("…", "live from token 2")
        if len(t) >= 2 and t[-1] > t[0]:
            rate = (len(t) - 1) / (t[-1] - t[0])
            self.card_decode.set(f"{rate:.1f} tok/s", f"live, {len(t)} tokens")
            self.card_itl.set(*itl_texts(gaps))
