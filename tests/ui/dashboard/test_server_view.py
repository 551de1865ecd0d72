"""The Server view and the card overlay of a remote chat: the server's own prefill, decode and KV beside the
client's wall-clock TTFT, each labelled by its source; the window's poller against a fake engine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.remote.engines import SPECS, VLLM
from app.core.remote.exposition import read_exposition
from app.core.remote.measures import measure
from app.engine.remote.backend import RemoteClient
from app.ui.engine_link.server_watch_qt import ServerWatchQt
from chat_drive import done, send, tokens
from fake_engine import loaded_event
from fake_window import make_window
from metrics_server import FakeEngine

pytestmark = pytest.mark.gui
DATA = Path(__file__).resolve().parents[2] / "data" / "remote_metrics"


def _measures():
    a, b = ((DATA / f"vllm-{x}.prom").read_text(encoding="utf-8") for x in "ab")
    return measure(SPECS[VLLM], read_exposition(b, 60.0), read_exposition(a, 0.0))


@pytest.fixture
def win(qtbot, tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.core.chat.store import ChatStore

    store = ChatStore(tmp_path / "chats.sqlite3")
    w = make_window(qtbot, store=store)
    w.show()
    w.engine._dispatch(dataclasses.replace(loaded_event(model_desc="served (remote)"),
                                           model_path="http://127.0.0.1:9/v1", chat_template_source="server"))
    yield w
    w.close()
    store.close()


def test_the_server_view_shows_the_engines_numbers(win) -> None:  # type: ignore[no-untyped-def]
    d = win.dashboard
    assert not d.remote_server.isVisibleTo(d)  # nothing polled yet
    d.server_link.on_measures(_measures())
    panel = d.remote_server
    assert panel.isVisibleTo(d) and panel.title() == "Server · server: vLLM"
    assert (panel.card_requests.value.text(), panel.card_requests.detail.text()) == (
        "2", "2 running · 1 waiting · 1 preempted")
    assert panel.card_kv.value.text() == "25 %"
    assert panel.card_prefill.value.text() == "2,048 tok/s" and panel.card_decode.value.text() == "50.0 tok/s"
    assert panel.card_ttft.detail.text().startswith("p95 ")
    assert panel.curve_running.getData()[1].tolist() == [2]


def test_the_cards_carry_the_servers_phases_beside_the_clients(win) -> None:  # type: ignore[no-untyped-def]
    d = win.dashboard
    d.server_link.on_measures(_measures())
    rid = send(win, "hello")
    tokens(win, rid, "Hi", " there")
    d.server_link.on_measures(_measures())  # mid-reply: the live numbers keep the cards
    assert d.card_prefill.value.text() == "n/a"
    done(win, rid)
    assert (d.card_prefill.value.text(), d.card_prefill.detail.text()) == ("2,048 tok/s", "server: vLLM")
    assert d.card_kv.value.text() == "25 %" and d.card_kv.detail.text().startswith("server: vLLM")
    assert d.card_ttft.detail.text() == "client wall clock"
    assert d.card_decode.detail.text() == "server: vLLM: 50.0 tok/s"


def test_a_local_model_hides_the_server_view(win) -> None:  # type: ignore[no-untyped-def]
    d = win.dashboard
    d.server_link.on_measures(_measures())
    win.engine._dispatch(loaded_event())
    assert not d.remote_server.isVisibleTo(d) and d.server_link.watch.source is None


def test_the_poller_reads_a_server_and_says_why_it_cannot(qtbot, fake_engine: tuple[str, FakeEngine]) -> None:  # type: ignore[no-untyped-def]
    url, st = fake_engine
    st.bodies["/metrics"] = (DATA / "vllm-b.prom").read_text(encoding="utf-8")
    client = RemoteClient(url, api_key="k")
    client.start()
    watch = ServerWatchQt()
    with qtbot.waitSignal(watch.measures, timeout=10_000) as got:
        assert watch.follow(client)
    assert got.args[0].running == 2
    st.bodies["/metrics"] = "vllm:num_requests_running{ 1\n"
    with qtbot.waitSignal(watch.failed, timeout=10_000) as why:
        watch.poll()
    assert "not Prometheus" in why.args[0]
    watch.stop()
    assert not watch.follow(object())  # a local engine is not polled


def test_an_ollama_server_shows_its_model_memory_and_context(win) -> None:  # type: ignore[no-untyped-def]
    import json

    from app.core.remote.ollama import ps_measures

    ps = ps_measures(json.loads((DATA / "ollama-ps.json").read_text(encoding="utf-8")), 1.0, "llama3.1:8b")
    assert ps is not None and ps.memory_bytes and ps.kv_capacity
    panel = win.dashboard.remote_server
    panel.on_measures(ps)
    assert panel.title() == "Server · server: Ollama"
    assert panel.card_kv.value.text() == f"{ps.memory_bytes / 2**30:.1f} GiB"
    detail = panel.card_kv.detail.text()
    assert "on the GPU" in detail and f"context {ps.kv_capacity:,} tokens" in detail
