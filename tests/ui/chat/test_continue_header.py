"""While Continue writes more of a reply, its header shows no numbers: the ones stored are its earlier part's
(TTFT, prefill, decode) and read as the continuation's; the continuation's own come when it ends, as a new
reply's do."""

from __future__ import annotations

import pytest

from chat_drive import done, request_of, send, tokens

pytestmark = pytest.mark.gui


def test_the_header_during_continue_shows_no_earlier_numbers(win) -> None:  # type: ignore[no-untyped-def]
    rid = send(win, "tell me a story")
    tokens(win, rid, "Once", " upon")
    done(win, rid, "length", decode_tps=11.0)
    reply = win.store.messages(win.session.conversation.id)[-1]
    header = win.message_view.widget_for(reply.id).metrics_label
    assert "decode 11.0 tok/s" in header.text()
    assert win.continue_reply()
    rid2 = request_of(win)
    tokens(win, rid2, " a", " time")
    assert header.text() == "" and header.toolTip() == ""  # not the earlier part's 11.0 tok/s
    done(win, rid2, "stop", decode_tps=33.0)
    assert "decode 33.0 tok/s" in header.text()
