"""The live cards follow a reply from its first tokens: token 1 (which the engine sends alone, at once) shows
TTFT and that the rate comes with token 2; the batch with token 2 shows Decode and ITL at once, not a pacing
interval later. The same when the chat was switched away and back right after Send, before token 1."""

from __future__ import annotations

import time

import pytest

from chat_drive import prefilled, send, tokens

pytestmark = pytest.mark.gui


def _live_from_the_start(win, rid: str) -> None:  # type: ignore[no-untyped-def]
    d = win.dashboard
    prefilled(win, rid)
    t0 = time.monotonic()
    tokens(win, rid, "Once", t0=t0)  # token 1 comes alone
    assert d.card_ttft.detail.text() == "live; final at the end"
    for card in (d.card_decode, d.card_itl):
        assert "waiting for token 1" not in card.detail.text()
    tokens(win, rid, " upon", " a", t0=t0 + 0.02)  # the next batch: the rate and the gaps at once
    assert d.card_decode.detail.text() == "live, 3 tokens"
    assert d.card_itl.value.text().endswith(" ms")


def test_the_cards_are_live_from_token_2(win) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    _live_from_the_start(win, send(win, "tell me a story"))


@pytest.mark.parametrize("way", ["through another chat", "its own row"])
def test_a_switch_right_after_send_keeps_the_cards_live(win, way: str) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    other = win.session.conversation.id
    win.new_chat()
    chat = win.session.conversation.id
    rid = send(win, "tell me a story")
    if way == "through another chat":
        win.open_conversation(other)
    win.open_conversation(chat)  # before token 1
    _live_from_the_start(win, rid)


def test_tokens_that_came_while_away_count_at_once(win) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    other = win.session.conversation.id
    win.new_chat()
    chat = win.session.conversation.id
    rid = send(win, "tell me a story")
    win.open_conversation(other)  # right after Send
    prefilled(win, rid)
    t0 = time.monotonic()
    tokens(win, rid, "Once", t0=t0)
    tokens(win, rid, " upon", " a", t0=t0 + 0.02)
    win.open_conversation(chat)
    d = win.dashboard
    assert d.card_decode.detail.text() == "live, 3 tokens" and d.card_itl.value.text().endswith(" ms")
    tokens(win, rid, " time", t0=t0 + 0.05)
    assert d.card_ttft.detail.text() == "live; final at the end"
