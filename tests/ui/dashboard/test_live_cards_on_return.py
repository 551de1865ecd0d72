"""Going back to the chat whose reply is being written shows that reply's live numbers so far (TTFT,
prefill, prompt tokens, decode over all its tokens, the KV card and the status bar), not a reply that seems
to start over, whether the way back is another chat's row and back or a click on its own row."""

from __future__ import annotations

import time

import pytest

from chat_drive import done, prefilled, send, tokens

pytestmark = pytest.mark.gui


def _cards(win) -> dict[str, tuple[str, str]]:  # type: ignore[no-untyped-def]
    d = win.dashboard
    return {name: (card.value.text(), card.detail.text()) for name, card in
            (("ttft", d.card_ttft), ("prefill", d.card_prefill), ("prompt", d.card_prompt),
             ("decode", d.card_decode), ("kv", d.card_kv))}


def _stream_in_b_then(win, qtbot, go_back) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    chat_a = win.session.conversation.id
    win.new_chat()
    chat_b = win.session.conversation.id
    rid = send(win, "write a poem")
    prefilled(win, rid, prompt_tokens=20, prefill_tokens=20, ms=40.0)
    t0 = time.monotonic()
    tokens(win, rid, *["w"] * 12, t0=t0)
    go_back(win, chat_a, chat_b)
    tokens(win, rid, *["x"] * 13, t0=t0 + 0.12)  # 25 tokens in all, the last 13 while A or B was reopened
    win.dashboard._refresh_live()
    cards = _cards(win)
    assert cards["ttft"][0].endswith(" ms") and "waiting" not in cards["ttft"][1]
    assert cards["prefill"] == ("500 tok/s", "20 tok in 40 ms")
    assert cards["prompt"][0] == "20" and "waiting" not in cards["prompt"][1]
    assert cards["decode"][1] == "live, 25 tokens"
    assert cards["kv"][0] == "44 tok"  # prompt 20 + 24 decode steps
    assert win.dashboard.kv_bar.value() == 44 and "KV 44/512" in win.status_line.part("memory")
    done(win, rid, tokens=25, prompt_tokens=20)
    assert win.dashboard.card_decode.detail.text() != "live, 25 tokens"  # the final numbers replace them


def test_back_to_the_streaming_chat_through_another_chat(win, qtbot) -> None:  # type: ignore[no-untyped-def]
    def via_a(w, chat_a, chat_b):  # type: ignore[no-untyped-def]
        w.open_conversation(chat_a)
        w.open_conversation(chat_b)

    _stream_in_b_then(win, qtbot, via_a)


def test_clicking_the_streaming_chats_own_row(win, qtbot) -> None:  # type: ignore[no-untyped-def]
    _stream_in_b_then(win, qtbot, lambda w, _a, chat_b: w.open_conversation(chat_b))


def test_tokens_written_while_another_chat_is_shown_count_when_back(win, qtbot) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    chat_a = win.session.conversation.id
    win.new_chat()
    chat_b = win.session.conversation.id
    rid = send(win, "write a poem")
    prefilled(win, rid)
    t0 = time.monotonic()
    tokens(win, rid, *["w"] * 5, t0=t0)
    win.open_conversation(chat_a)
    tokens(win, rid, *["x"] * 7, t0=t0 + 0.05)  # unseen: chat A is on screen
    assert win.dashboard.card_decode.detail.text() != "live, 12 tokens"  # A's cards are A's
    assert "KV 31/512" in win.status_line.part("memory")  # the status bar is the engine's: it follows the reply
    win.open_conversation(chat_b)
    assert win.dashboard.card_decode.detail.text() == "live, 12 tokens"
    assert win.dashboard.card_kv.value.text() == "31 tok"
