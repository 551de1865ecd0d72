"""In the window the "why slow?" line is about the chat on screen: shown after a slow reply ends there, gone
when another chat is shown, and never shown in a chat for a reply that ended in another one (it once told an
empty chat why another chat's reply was slow). Fake engine; speeds are shares of the prediction."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.bench.zoo import zoo_path
from app.core.chat.store import ChatStore
from app.core.metrics.evidence import Evidence
from app.core.metrics.phase import PhaseMetrics
from app.core.predict.reply_check import expected
from app.engine import protocol as P
from chat_drive import open_window, prefilled, request_of, send, tokens
from fake_engine import loaded_event

pytestmark = pytest.mark.gui

HOG = Evidence(wall_s=4.0, n_cpus=2, threads=2, other_cores=1.6, top_others=[("stress", 1.5)], engine_cores=0.4)


def _slow(win: Any, share: float = 0.3) -> dict[str, Any]:
    """A reply's metrics, decoding at `share` of the prediction for the loaded model, with evidence."""
    info, rates, cfg = win.dashboard.slow_line._model
    m = PhaseMetrics(prompt_tokens=40, prefill_tokens=40, prefill_ms=1.0, decode_tokens=64, generated_tokens=65)
    decode, prefill = expected(info, rates, cfg, m)
    m.decode_ms = 1000.0 * 64 / (decode * share)
    m.prefill_ms = 1000.0 * 40 / prefill
    return {**m.to_dict(), "evidence": HOG.to_dict()}


@pytest.fixture
def win(qtbot: Any, tmp_path: Path) -> Any:
    store = ChatStore(tmp_path / "chats.sqlite3")
    model = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    w = open_window(qtbot, store, dataclasses.replace(loaded_event(), model_path=str(model), n_ctx=4096,
                                                      n_threads=2))
    qtbot.waitUntil(lambda: w.dashboard.slow_line._model is not None, timeout=15000)
    yield w
    w.close()
    store.close()


def _line(win: Any) -> str:
    line = win.dashboard.slow_line
    return line.text() if line.isVisibleTo(win.dashboard) else ""


def test_the_line_follows_the_chat_on_screen(win: Any) -> None:
    rid = send(win, "first chat")
    chat_a = win.session.conversation.id
    win.engine._dispatch(P.Done(rid, "x", "length", _slow(win)))
    assert _line(win).startswith("Why slow? decode ")  # its reply, on screen
    win.new_chat()
    assert _line(win) == ""  # an empty chat: nothing to explain
    chat_b = win.session.conversation.id
    win.open_conversation(chat_a)
    rid = send(win, "again")
    win.open_conversation(chat_b)  # away while it is written
    win.engine._dispatch(P.Done(rid, "y", "length", _slow(win)))
    assert _line(win) == "", "the empty chat explains a reply of another chat"
    rid = send(win, "this chat's own")
    win.engine._dispatch(P.Done(rid, "z", "length", _slow(win)))
    assert "0.30× the prediction" in _line(win)


@pytest.mark.parametrize("button", ["continue_button", "regen_button"])
def test_a_new_reply_takes_the_last_ones_line_away(win: Any, qtbot: Any, button: str) -> None:
    """Continue or Regenerate: the line explained the reply before, while the cards show the new one live (it
    said "decode 0.30× the prediction" next to a live Decode card at full speed)."""
    rid = send(win, "a long answer please")
    win.engine._dispatch(P.Done(rid, "cut short", "length", _slow(win)))
    assert _line(win).startswith("Why slow? ")
    qtbot.mouseClick(getattr(win, button), Qt.MouseButton.LeftButton)
    assert win.session.busy
    rid = request_of(win)
    prefilled(win, rid)
    tokens(win, rid, "more", " words")
    assert _line(win) == "", "the last reply's line stays up while the new one streams"
    win.engine._dispatch(P.Done(rid, "!", "length", _slow(win, share=0.5)))
    assert "0.50× the prediction" in _line(win)  # the new reply's own line, once it ends
