"""The server box's decode card says what grammars cost: "grammar: -X % decode", only once one ran."""

from __future__ import annotations

from app.core.metrics.serve_traffic import Traffic
from app.ui.dashboard.traffic import ServerTrafficPanel, grammar_note


def snapshot(requests: int, cost: float) -> Traffic:
    return Traffic(t=1.0, processing=0, deferred=0, kv_tokens=0, kv_ratio=0.0, decode_tps=50.0, ttft_ms=None,
                   finished=0, tokens_total=1234, grammar_requests=requests, grammar_cost=cost)


def test_the_decode_card_gives_the_grammar_cost(qtbot) -> None:
    panel = ServerTrafficPanel()
    qtbot.addWidget(panel)
    panel.on_traffic(snapshot(3, 0.042))
    assert "grammar: -4.2 % decode (3 req)" in panel.card_rate.detail.text()
    panel.on_traffic(snapshot(0, 0.0))
    assert "grammar" not in panel.card_rate.detail.text()
    assert grammar_note(snapshot(0, 0.5)) == ""
