"""The window connected to a live `roofline serve` on the default model: the Server view fills from its own
/metrics and, after a reply, the cards carry its prefill and KV labelled "server: roofline serve", and the
roofline places its decode against the bandwidth entered for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_window import make_window
from served import KEY, Served, serve

pytestmark = [pytest.mark.model, pytest.mark.gui]


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "2048") as s:
        yield s


def test_the_window_reads_a_live_servers_own_metrics(qtbot, tmp_path: Path, served: Served) -> None:  # type: ignore[no-untyped-def]
    from app.core.chat.store import ChatStore

    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store)
    win.show()
    try:
        from app.core.remote.roof_entry import RemoteServerRoofs

        win.remember_server_roofs(served.url, RemoteServerRoofs(bandwidth_gbs=50.0))  # as the dialog saves it
        win.connect_remote(served.url, KEY)
        d = win.dashboard
        qtbot.waitUntil(lambda: d.remote_server.last is not None, timeout=60_000)
        assert d.remote_server.title() == "Server · server: roofline serve"
        win.sampling_panel.max_tokens.setValue(12)
        win.input.setPlainText("Name three colours.")
        win.submit()
        qtbot.waitUntil(lambda: not win.session.busy, timeout=120_000)
        # the next poll after the reply: the server's own prefill and KV on the cards, TTFT the client's
        qtbot.waitUntil(lambda: d.card_prefill.detail.text() == "server: roofline serve", timeout=30_000)
        assert d.card_prefill.value.text().endswith("tok/s")
        assert d.card_kv.detail.text().startswith("server: roofline serve")
        assert d.card_ttft.detail.text().startswith("client wall clock")
        m = d.remote_server.last
        assert m is not None and m.ttft is not None and m.ttft.count >= 1 and m.kv_tokens
        # the server's decode on the roofline, against the bandwidth entered for it; its size from its model list
        qtbot.waitUntil(lambda: d.roof_decode.xData is not None and len(d.roof_decode.xData) == 1, timeout=30_000)
        info = win.engine.loaded_info
        assert d.roof_decode.xData[0] == pytest.approx(2.0 * info.n_params / info.model_size)
        assert d.roof_label.text().startswith("server: roofline serve · roofs entered for this server · "
                                              "Bandwidth roof: 50.0 GB/s")
        d.grab().save(str(tmp_path / "dashboard.png"))
    finally:
        win.close()
        store.close()
