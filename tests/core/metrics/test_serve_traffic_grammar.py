"""What grammars (structured output) cost the server's requests: counted in app.server.metrics from each
reply's timings, exported on /metrics, read back by app.core.metrics.serve_traffic for the dashboard."""

from __future__ import annotations

import pytest

from app.core.metrics.serve_traffic import parse_metrics, traffic
from app.server.metrics import ServerMetrics


def reply(predicted_n: int, predicted_ms: float, **grammar: float) -> dict[str, float]:
    return {"prompt_n": 5, "prompt_ms": 10.0, "predicted_n": predicted_n, "predicted_ms": predicted_ms, **grammar}


def test_the_grammar_share_of_decode_reaches_the_dashboard_snapshot() -> None:
    m = ServerMetrics()
    m.on_done("stop", reply(101, 1000.0))  # unconstrained: not counted in the grammar's numbers
    m.on_done("stop", reply(11, 200.0, grammar_per_token_ms=2.0))  # 10 decode tokens × 2 ms = 20 of 200 ms
    m.on_done("stop", reply(21, 300.0, grammar_per_token_ms=1.0))  # 20 × 1 = 20 of 300 ms
    t = traffic(parse_metrics(m.render()), 1.0)
    assert t.grammar_requests == 2
    assert t.grammar_cost == pytest.approx(40.0 / 500.0)
    assert t.tokens_total == 133


def test_no_grammar_no_cost() -> None:
    m = ServerMetrics()
    m.on_done("stop", reply(11, 100.0))
    t = traffic(parse_metrics(m.render()), 1.0)
    assert t.grammar_requests == 0 and t.grammar_cost == 0.0
