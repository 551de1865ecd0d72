"""The window connected to a fake Ollama speaking its native API (tests/helpers/fake_ollama.py): after a reply
the per-message cards carry Ollama's own prefill and decode of that reply, labelled "server: Ollama", where
llama-server's `timings` show; the Server view's rates are the last reply's, beside /api/ps's model memory;
without /api/ps the cards still name the server; a hostile number leaves the client's clock and one note."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.remote.ollama import REPLY_SOURCE
from fake_ollama import FakeOllama
from fake_window import make_window

pytestmark = pytest.mark.gui


@pytest.fixture
def win(qtbot, tmp_path: Path) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    from app.core.chat.store import ChatStore

    store = ChatStore(tmp_path / "chats.sqlite3")
    w = make_window(qtbot, store=store)
    w.show()
    yield w
    w.close()
    store.close()


def _reply(qtbot: Any, win: Any, url: str, polled: bool = True) -> Any:
    """Connect to the server as the window does, wait for its first poll (or its failure), send one message."""
    win.connect_remote(url, "k")
    d = win.dashboard
    qtbot.waitUntil(lambda: win.engine.remote is not None and win.engine.loaded_info is not None, timeout=30_000)
    if polled:
        qtbot.waitUntil(lambda: d.remote_server.last is not None, timeout=30_000)
    else:
        qtbot.waitUntil(lambda: d.remote_server.status.text().startswith("server metrics:"), timeout=30_000)
    win.input.setPlainText("hello")
    win.submit()
    qtbot.waitUntil(lambda: not win.session.busy, timeout=30_000)
    reply = win.store.messages(win.session.conversation.id)[-1]
    assert reply.role == "assistant" and reply.content == "Hello there"
    return reply


def test_the_cards_show_ollamas_own_phases_of_the_reply(qtbot, win, fake_ollama: tuple[str, FakeOllama]) -> None:  # type: ignore[no-untyped-def]
    url, st = fake_ollama
    reply = _reply(qtbot, win, url)
    assert [p for p, _ in st.posts] == ["/api/chat"]
    assert reply.metrics["source"] == REPLY_SOURCE
    d = win.dashboard
    assert (d.card_prefill.value.text(), d.card_prefill.detail.text()) == ("2,048 tok/s", "server: Ollama")
    assert d.card_decode.value.text() == "50.0 tok/s" and d.card_decode.detail.text() == "server: Ollama: 50.0 tok/s"
    assert d.card_ttft.detail.text() == "client wall clock"
    panel = d.remote_server
    assert (panel.card_prefill.value.text(), panel.card_prefill.detail.text()) == ("2,048 tok/s", "last reply")
    assert (panel.card_decode.value.text(), panel.card_decode.detail.text()) == ("50.0 tok/s", "last reply")
    assert panel.card_kv.value.text() == "6.2 GiB" and panel.status.text() == "last reply; model memory now"
    # the next poll (/api/ps alone) keeps the reply's rates
    d.server_link.watch.poll()
    qtbot.waitUntil(lambda: not d.server_link.watch._busy, timeout=10_000)
    assert panel.card_prefill.value.text() == "2,048 tok/s"


def test_without_api_ps_the_cards_still_name_the_server(qtbot, win, fake_ollama: tuple[str, FakeOllama]) -> None:  # type: ignore[no-untyped-def]
    url, st = fake_ollama
    st.ps = False
    _reply(qtbot, win, url, polled=False)
    d = win.dashboard
    assert d.card_prefill.value.text() == "2,048 tok/s"
    assert d.card_prefill.detail.text() == "server: Ollama · 512 tok in 250 ms"
    assert d.card_decode.detail.text() == "server: Ollama · 128 tok in 2,560 ms"


def test_a_hostile_number_leaves_the_clients_clock_and_one_note(qtbot, win,  # type: ignore[no-untyped-def]
                                                                fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.last = '"prompt_eval_count": 512, "prompt_eval_duration": NaN, "eval_count": 129, "eval_duration": 2560000000'
    reply = _reply(qtbot, win, url)
    assert reply.metrics["server_notes"] == ["Ollama's prompt_eval_duration (NaN) is not a duration: ignored"]
    d = win.dashboard
    assert (d.card_prefill.value.text(), d.card_prefill.detail.text()) == ("n/a", "inside TTFT (remote)")
    assert d.remote_server.card_prefill.detail.text() == "not reported"
    header = html.unescape(win.message_view.widget_for(reply.id).metrics_label.toolTip())
    assert "note    : Ollama's prompt_eval_duration (NaN) is not a duration: ignored" in header
