"""The lines a reply's Done.metrics add to the dashboard's cards (first answer and thinking tokens on TTFT, the
measured draft speed-up on Decode) belong to the chat on screen: a reply that ends in a background chat
leaves the shown chat's cards alone, and its lines come back with its chat. Played through the fake engine."""

from __future__ import annotations

import pytest

from app.engine import protocol as P
from chat_drive import done, metrics, send, tokens

pytestmark = pytest.mark.gui

THINKING = "first answer 812 ms · 120 thinking tok"
DRAFTING = "measured ×1.27 vs plain decode"
LINES = {"reasoning_tokens": 120, "ttft_answer_ms": 812.0, "draft_tokens": 8, "draft_accepted": 6,
         "lookup_speedup": 1.27}


def _cards(win) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    return win.dashboard.card_ttft.detail.text(), win.dashboard.card_decode.detail.text()


def test_a_background_reply_writes_its_lines_on_its_own_chat(win) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    chat_b = win.session.conversation.id
    done(win, send(win, "what is prefill?"))  # B has a reply of its own, without thinking or drafting
    b_cards = _cards(win)
    win.new_chat()
    chat_a = win.session.conversation.id
    rid = send(win, "think about decode")
    tokens(win, rid, "Decode", " is", " memory-bound")
    win.open_conversation(chat_b)  # the user switches while A's reply is written
    win.engine._dispatch(P.Done(rid, "Decode is memory-bound", "stop", metrics() | LINES))
    assert _cards(win) == b_cards
    assert THINKING not in " ".join(_cards(win)) and DRAFTING not in " ".join(_cards(win))
    win.open_conversation(chat_a)  # back in A: its reply's lines with its numbers
    ttft, decode = _cards(win)
    assert ttft.endswith(THINKING) and decode.endswith(DRAFTING)


def test_the_shown_chats_reply_gets_its_lines_when_it_ends(win) -> None:  # type: ignore[no-untyped-def]
    rid = send(win, "think about decode")
    tokens(win, rid, "Decode", " is")
    win.engine._dispatch(P.Done(rid, "Decode is", "stop", metrics() | LINES))
    ttft, decode = _cards(win)
    assert ttft.endswith(THINKING) and decode.endswith(DRAFTING)
