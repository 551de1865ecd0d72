"""The context meter under the input: how much of the model's context the chat on screen and the message
being typed take, before it is sent ("context ≈ 1,234 of 2,048 tokens · 60 %"), so a message that will not
fit is seen while it is written, not at Send.

The chat's tokens are measured, not guessed: the last reply's prompt plus what it generated is what the
engine held for it (its metrics). The draft has no tokens yet (the tokenizer is in the engine process), so it
is estimated at this chat's own characters per token (from that same prompt), or 4 without a reply yet:
hence "≈". Over 90 % the meter warns; over 100 % it says the message will not fit. While the chat's reply is
being written, the chat's part follows its tokens as they come (the dashboard's live KV count: the prompt and
the tokens so far), not the count from before it was sent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QLabel

from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics
from app.ui.toolkit import theme

if TYPE_CHECKING:
    from app.ui.dashboard.live_numbers import LiveKV
    from app.ui.window.main_window import MainWindow

DEFAULT_CHARS_PER_TOKEN = 4.0  # English with a BPE vocabulary, before this chat measured its own
WARN_SHARE = 0.9


@dataclass(frozen=True)
class ContextUse:
    history: int  # tokens the chat holds (measured at its last reply, else estimated)
    draft: int  # the message being typed, estimated
    n_ctx: int
    chars_per_token: float
    measured: bool  # the history comes from a reply's metrics
    live: bool = False  # ... or from the reply being written, as its tokens come

    @property
    def total(self) -> int:
        return self.history + self.draft

    @property
    def share(self) -> float:
        return self.total / self.n_ctx if self.n_ctx > 0 else 0.0


def context_use(messages: list[Message], system_prompt: str, draft: str, n_ctx: int) -> ContextUse:
    """What the chat and the draft take of `n_ctx` (see the module's docstring)."""
    chars = len(system_prompt)
    measured: tuple[int, int, int, int] | None = None  # (index, tokens held, prompt chars, prompt tokens)
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.metrics:
            pm = PhaseMetrics.from_dict(m.metrics)
            if pm.prompt_tokens > 0:  # this reply's prompt: everything before it
                measured = (i, pm.prompt_tokens + pm.generated_tokens, chars, pm.prompt_tokens)
        chars += len(m.content)
    if measured is None:
        cpt = DEFAULT_CHARS_PER_TOKEN
        return ContextUse(round(chars / cpt), round(len(draft) / cpt), n_ctx, cpt, False)
    last, held, prompt_chars, prompt_tokens = measured
    cpt = prompt_chars / prompt_tokens if prompt_chars > 0 else DEFAULT_CHARS_PER_TOKEN
    cpt = min(max(cpt, 1.0), 8.0)  # a template's own tokens skew a tiny prompt's ratio
    after = sum(len(m.content) for m in messages[last + 1:])
    return ContextUse(held + round(after / cpt), round(len(draft) / cpt), n_ctx, cpt, True)


def meter_text(use: ContextUse) -> tuple[str, str, bool]:
    """(the meter's line, its tooltip, whether it warns)."""
    pct = 100 * use.share
    line = f"context ≈ {use.total:,} of {use.n_ctx:,} tokens · {pct:.0f} %"
    if use.share > 1:
        line += " · will not fit"
    how = ("measured as its reply is written" if use.live else "measured at its last reply" if use.measured
           else "estimated (no reply yet)")
    tip = (f"This chat: {use.history:,} tokens, {how}. The message being typed: about {use.draft:,} tokens "
           f"(at {use.chars_per_token:.1f} characters per token). The model's context: {use.n_ctx:,} tokens.")
    return line, tip, use.share > WARN_SHARE


class ContextMeter(QObject):
    """Keeps `label` up to date as the draft, the chat or the model changes (the draft after a short pause:
    a paste of a book is counted once, not per keystroke)."""

    def __init__(self, window: MainWindow, label: QLabel) -> None:
        super().__init__(window)
        self.window = window
        self.label = label
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(150)
        self._timer.timeout.connect(self.update)
        window.input.textChanged.connect(self._timer.start)
        window.engine.loaded.connect(lambda _l: self.update())
        window.session.conversation_changed.connect(lambda _c: self.update())
        window.session.message_finished.connect(lambda _m: self.update())
        window.session.message_added.connect(lambda _m: self.update())
        self._live_cells: int | None = None  # the context the reply being written holds so far
        self._shown: ContextUse | None = None  # the chat's use as the store has it (without the live count)
        window.session.reply_started.connect(self._reply_started)
        window.dashboard.live_kv_changed.connect(self._live_kv)
        self.update()

    def _reply_started(self, _message_id: int) -> None:
        self._live_cells = None

    def _live_kv(self, kv: LiveKV) -> None:
        """A reply's tokens came: its chat's part follows them while that chat is shown (no store read)."""
        self._live_cells = kv.cells_used
        if self._shown is not None and self._follows_reply():
            self._show(self._shown)

    def _follows_reply(self) -> bool:
        session = self.window.session
        conv = session.conversation
        return self._live_cells is not None and conv is not None and session.streaming_conversation_id == conv.id

    def update(self) -> None:
        w = self.window
        if w._closed:  # a pause's timer that fires after the window closed (its chat store with it)
            return
        loaded, conv = w.engine.loaded_info, w.session.conversation
        if loaded is None or loaded.n_ctx <= 0:
            self._shown = None
            self.label.hide()
            return
        messages = w.store.messages(conv.id) if conv is not None else []
        system = conv.system_prompt if conv is not None else ""
        self._shown = context_use(messages, system, w.input.toPlainText(), loaded.n_ctx)
        self._show(self._shown)

    def _show(self, use: ContextUse) -> None:
        if self._follows_reply() and self._live_cells is not None:
            use = replace(use, history=self._live_cells, measured=True, live=True)
        line, tip, warn = meter_text(use)
        self.label.setText(line)
        self.label.setToolTip(tip)
        c = theme.colors()
        self.label.setStyleSheet(f"color: {c.warn if warn else c.muted};")
        self.label.show()
