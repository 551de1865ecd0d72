"""The Server traffic panel while a non-streamed request runs: the server's token counters (llama-server's too)
move only when a request ends, so the Aggregate decode card said "0 tok/s · 0 tokens served" for the whole of a
40-second reply while its KV cells grew. It now reads the server's decode calls, which move every step, and
says that the tokens are counted at the end; with no request in flight it is a plain 0 again."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.metrics.serve_traffic import parse_metrics, traffic
from app.server.metrics import ServerMetrics

pytestmark = pytest.mark.gui


def snapshot(m: ServerMetrics) -> dict[str, float]:
    return parse_metrics(m.render())


def test_a_running_request_shows_its_decode_steps_then_its_tokens(qtbot: Any) -> None:
    from app.ui.dashboard.traffic import ServerTrafficPanel

    panel = ServerTrafficPanel()
    qtbot.addWidget(panel)
    panel.set_url("http://127.0.0.1:8080/v1")
    m = ServerMetrics()
    m.on_stats(running=1, waiting=0, kv_tokens=6, n_ctx=8192, steps=0)
    before = snapshot(m)
    m.on_stats(running=1, waiting=0, kv_tokens=26, n_ctx=8192, steps=20)  # 20 tokens decoded, none counted
    now = snapshot(m)
    panel.on_traffic(traffic(now, 2.0, before, 0.0))
    assert panel.card_rate.value.text() == "10.0 steps/s"
    assert "counted when a request ends" in panel.card_rate.detail.text()

    m.on_done("stop", {"predicted_n": 21, "predicted_ms": 2100.0, "prompt_n": 6, "prompt_ms": 60.0})
    m.on_stats(running=0, waiting=0, kv_tokens=27, n_ctx=8192, steps=21)
    after = snapshot(m)
    panel.on_traffic(traffic(after, 3.0, now, 2.0))
    assert panel.card_rate.value.text() == "21.0 tok/s"  # the ended request's tokens, counted now
    assert panel.card_rate.detail.text().startswith("21 tokens served")

    idle = snapshot(m)
    panel.on_traffic(traffic(idle, 4.0, after, 3.0))
    assert panel.card_rate.value.text() == "0 tok/s" and "decoding" not in panel.card_rate.detail.text()
