"""A long prompt's prefill on screen (issue 32, prompt-processing progress): while the engine reports chunks,
the reply being written says how many tokens of the prompt are evaluated, the share and the time left, and
so does the dashboard's Prefill card, also after going to another chat and back; the first token puts the
reply's "writing…" back and the card's final numbers on it."""

from __future__ import annotations

import pytest

import chat_drive
from app.engine import protocol as P

pytestmark = pytest.mark.gui


def reply_state(window) -> str:
    widget = window.message_view.widget_for(window.session.streaming_message_id)
    assert widget is not None
    return widget.state_label.text()


def test_prefill_progress_on_the_reply_and_the_card(window, qtbot) -> None:
    rid = chat_drive.send(window, "a long document " * 200)
    assert "waiting for token 1" in window.dashboard.card_prefill.detail.text()
    window.engine._dispatch(P.PrefillProgress(rid, done=512, total=2048, elapsed_ms=6000.0))
    line = reply_state(window)
    assert "512 of 2,048 tokens" in line and "25 %" in line and "~18 s left" in line
    card = window.dashboard.card_prefill
    assert card.value.text() == "25 %"
    assert "512 of 2,048 tok" in card.detail.text() and "~18 s left" in card.detail.text()
    window.engine._dispatch(P.PrefillProgress(rid, done=1024, total=2048, elapsed_ms=12000.0))
    assert card.value.text() == "50 %" and "~12 s left" in reply_state(window)
    busy_chat = window.session.conversation.id
    window.new_chat()  # another chat, then back to the one being written
    window.open_conversation(busy_chat)
    assert card.value.text() == "50 %" and "1,024 of 2,048 tok" in card.detail.text()
    chat_drive.prefilled(window, rid, prompt_tokens=2048, prefill_tokens=2048, ms=24000.0)
    chat_drive.tokens(window, rid, "Sure")
    assert reply_state(window) == "writing…"
    assert card.value.text() == "85 tok/s"


def test_progress_of_an_ended_request_is_ignored(window) -> None:
    rid = chat_drive.send(window, "hello")
    chat_drive.prefilled(window, rid)
    chat_drive.tokens(window, rid, "Hi")
    chat_drive.done(window, rid)
    before = window.dashboard.card_prefill.value.text()
    window.engine._dispatch(P.PrefillProgress(rid, done=1, total=2, elapsed_ms=1.0))
    assert window.dashboard.card_prefill.value.text() == before
