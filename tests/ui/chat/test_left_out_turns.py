"""When the chat no longer fits the context, the engine's prompt leaves out its oldest turns
(`messages_dropped` in the reply's metrics): the window says so in plain words on that reply (under its header,
also after the chat is opened again) and on the dashboard's context line, instead of answering as if the
model had read them. Played through the fake engine's Done."""

from __future__ import annotations

import pytest

from app.core.chat.left_out import messages_left_out
from app.engine import protocol as P
from chat_drive import metrics, send, tokens

pytestmark = pytest.mark.gui

SAID = "2 earlier messages left out to fit the 2,048-token context"


def test_the_words() -> None:
    assert messages_left_out({"messages_dropped": 2, "context_limit": 2048}) == SAID
    assert messages_left_out({"messages_dropped": 1}) == "1 earlier message left out to fit the context"
    assert messages_left_out({"messages_dropped": 0, "context_limit": 2048}) == ""
    assert messages_left_out({"messages_dropped": "2"}) == messages_left_out({}) == ""


def _note(win, reply_id: int):  # type: ignore[no-untyped-def]
    """The line under the reply's header, and whether it shows in the reply."""
    bubble = win.message_view.widget_for(reply_id)
    return bubble.context_label.text(), bubble.context_label.isVisibleTo(bubble)


def _reply_leaving_out(win, dropped: int) -> int:  # type: ignore[no-untyped-def]
    rid = send(win, "and what about decode?")
    tokens(win, rid, "Decode", " is", " memory-bound")
    reply_id = win.session.streaming_message_id
    win.engine._dispatch(P.Done(rid, "", "stop", metrics() | {"messages_dropped": dropped, "context_limit": 2048}))
    return int(reply_id)


def test_the_reply_and_the_dashboard_say_which_turns_were_left_out(win) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    chat = win.session.conversation.id
    reply_id = _reply_leaving_out(win, 2)
    assert _note(win, reply_id) == (SAID, True)
    assert win.dashboard.card_prompt.detail.text().endswith(SAID)
    win.new_chat()
    win.open_conversation(chat)  # the reply keeps saying it
    assert _note(win, reply_id) == (SAID, True)


def test_a_reply_that_left_nothing_out_says_nothing(win) -> None:  # type: ignore[no-untyped-def]
    reply_id = _reply_leaving_out(win, 0)
    assert _note(win, reply_id) == ("", False)
    assert "left out" not in win.dashboard.card_prompt.detail.text()


def test_the_dashboard_line_is_the_shown_chats(win) -> None:  # type: ignore[no-untyped-def]
    win.new_chat()
    other = win.session.conversation.id
    _reply_leaving_out(win, 0)
    win.new_chat()
    chat = win.session.conversation.id
    rid = send(win, "and what about decode?")
    win.open_conversation(other)  # the reply ends while another chat is shown: that chat's card stays its own
    win.engine._dispatch(P.Done(rid, "", "stop", metrics() | {"messages_dropped": 2, "context_limit": 2048}))
    assert "left out" not in win.dashboard.card_prompt.detail.text()
    win.open_conversation(chat)  # back: its last reply's line with its numbers
    assert win.dashboard.card_prompt.detail.text().endswith(SAID)
