"""While a remote server's reply streams, the cards say what a server does not show (its prefill is inside
TTFT, its KV cache is on its machine) instead of waiting for a prefill that never comes."""

from __future__ import annotations

import dataclasses

import pytest

from chat_drive import done, send, tokens
from fake_engine import loaded_event

pytestmark = pytest.mark.gui


@pytest.fixture
def remote_win(win):  # type: ignore[no-untyped-def]
    """The chat window after the user connected to a server (its model named by the server)."""
    win.engine._dispatch(dataclasses.replace(loaded_event(model_desc="fake-thinker (remote)"),
                                             model_path="http://127.0.0.1:9/v1", chat_template_source="server"))
    return win


def test_a_remote_reply_streaming_says_what_a_server_hides(remote_win) -> None:  # type: ignore[no-untyped-def]
    d = remote_win.dashboard
    rid = send(remote_win, "hello there")
    for texts in ((), ("Hi", " there", ",", " friend")):  # before the first token, then while it streams
        if texts:
            tokens(remote_win, rid, *texts)
            d._refresh_live()
        assert (d.card_prefill.value.text(), d.card_prefill.detail.text()) == ("n/a", "inside TTFT (remote)")
        assert (d.card_kv.value.text(), d.card_kv.detail.text()) == ("n/a", "remote server")
        assert "waiting for token 1" not in d.card_prompt.detail.text()
    assert d.card_decode.detail.text() == "live, 4 tokens"
    done(remote_win, rid)


def test_a_local_reply_still_waits_for_its_prefill(remote_win) -> None:  # type: ignore[no-untyped-def]
    remote_win.engine._dispatch(loaded_event())  # back on a local model
    send(remote_win, "hello")
    d = remote_win.dashboard
    assert d.card_prefill.detail.text() == "waiting for token 1" and d.card_kv.detail.text() == "grows from token 1"
