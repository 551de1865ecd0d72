"""Versions in the window: Regenerate and Edit keep earlier versions, ‹1/3› browses them, and the chat continues
from the version shown. Runs on the fake engine: no model process."""

from __future__ import annotations

import pytest

from app.engine import protocol as P

pytestmark = pytest.mark.gui




def _answer(win, text: str) -> None:
    """The fake engine answers the request just sent with `text`."""
    request = win.engine.client.sent[-1]
    assert isinstance(request, P.Generate)
    win.engine._on_reader_event(P.Token(request_id=request.request_id, text=text, index=0, t=0.0))
    win.engine.drain_tokens()
    win.engine._dispatch(P.Done(request_id=request.request_id, text=text, finish_reason="stop", metrics={}))


def _shown(win) -> list[str]:
    return [win.message_view.widget_for(i).text for i in win.message_view.message_ids()]


def test_regenerate_keeps_the_earlier_reply_and_the_chat_continues_from_the_one_shown(window) -> None:
    window.new_chat()
    window.input.setPlainText("Name a colour")
    window.submit()
    _answer(window, "Red.")
    assert window.regenerate()
    _answer(window, "Blue.")
    assert _shown(window) == ["Name a colour", "Blue."]
    reply_id = window.message_view.message_ids()[-1]
    nav = window.versions.navs[reply_id]
    assert nav.label.text() == "2/2" and nav.previous.isEnabled() and not nav.next.isEnabled()
    nav.previous.click()
    assert _shown(window) == ["Name a colour", "Red."]
    first_id = window.message_view.message_ids()[-1]
    assert window.versions.navs[first_id].label.text() == "1/2"
    window.input.setPlainText("And another?")
    window.submit()
    sent = window.engine.client.sent[-1]
    assert [m["content"] for m in sent.messages] == ["Name a colour", "Red.", "And another?"]


def test_edit_keeps_the_earlier_message_with_what_followed(window) -> None:
    window.new_chat()
    window.input.setPlainText("2+2?")
    window.submit()
    _answer(window, "4")
    user_id = window.message_view.message_ids()[0]
    window.begin_edit(user_id)
    window.input.setPlainText("3+3?")
    window.submit()
    _answer(window, "6")
    assert _shown(window) == ["3+3?", "6"]
    edited_id = window.message_view.message_ids()[0]
    assert window.versions.navs[edited_id].label.text() == "2/2"
    assert not window.versions.navs.get(window.message_view.message_ids()[1])  # the reply has one version
    window.versions.navs[edited_id].previous.click()
    assert _shown(window) == ["2+2?", "4"]


def test_no_switching_while_a_reply_streams(window) -> None:
    window.new_chat()
    window.input.setPlainText("hi")
    window.submit()
    _answer(window, "one")
    window.regenerate()  # streaming now
    user_id = window.message_view.message_ids()[0]
    assert window.versions.navs == {} or all(not n.isEnabled() for n in window.versions.navs.values())
    assert not window.versions.switch(user_id + 1, 1)
    _answer(window, "two")
    (nav,) = window.versions.navs.values()
    assert nav.isEnabled() and nav.label.text() == "2/2"
