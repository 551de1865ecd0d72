"""The dashboard's "why is it slow?" line: a reply measured under 0.7× the prediction for this load names the
cause in the evidence the engine recorded; a reply at its prediction shows nothing (app.ui.dashboard.slow_line).
Speeds are set as shares of the prediction, never absolute."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from app.core.bench.zoo import zoo_path
from app.core.metrics.evidence import Evidence
from app.core.metrics.phase import PhaseMetrics
from app.core.predict.reply_check import expected
from app.engine import protocol as P

pytestmark = pytest.mark.gui

HOG = Evidence(wall_s=4.0, n_cpus=2, threads=2, other_cores=1.6, top_others=[("stress", 1.5)], engine_cores=0.4)


def _reply(line: Any, share: float, evidence: Evidence | None) -> dict[str, Any]:
    """A reply of 40 prompt tokens and 64 decoded ones, decoding at `share` of the prediction."""
    info, rates, cfg = line._model
    m = PhaseMetrics(prompt_tokens=40, prefill_tokens=40, prefill_ms=1.0, decode_tokens=64, generated_tokens=65)
    decode, prefill = expected(info, rates, cfg, m)
    m.decode_ms = 1000.0 * 64 / (decode * share)
    m.prefill_ms = 1000.0 * 40 / prefill  # prefill at its prediction
    data = m.to_dict()
    if evidence is not None:
        data["evidence"] = evidence.to_dict()
    return data


@pytest.fixture
def dash(qtbot: Any, tmp_path: Path) -> Any:
    from app.ui.dashboard import Dashboard
    from fake_engine import fake_engine, loaded_event

    engine = fake_engine()
    d = Dashboard(engine)
    qtbot.addWidget(d)
    model = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    engine._dispatch(dataclasses.replace(loaded_event(), model_path=str(model), n_ctx=4096, n_threads=2))
    qtbot.waitUntil(lambda: d.slow_line._model is not None, timeout=15000)
    d.engine_fake = engine
    return d


def test_a_slow_reply_names_the_other_load(dash: Any) -> None:
    line = dash.slow_line
    dash.engine_fake._dispatch(P.Done("r1", "", "length", _reply(line, 0.4, HOG)))
    assert line.isVisibleTo(dash)
    text = line.text()
    assert text.startswith("Why slow? decode ") and "0.40× the prediction" in text
    assert "other processes used 1.6 of 2 CPU cores during the reply (busiest: stress 1.5)" in text


def test_a_reply_at_its_prediction_shows_nothing(dash: Any) -> None:
    line = dash.slow_line
    dash.engine_fake._dispatch(P.Done("r1", "", "length", _reply(line, 0.4, HOG)))
    dash.engine_fake._dispatch(P.Done("r2", "", "length", _reply(line, 0.95, HOG)))
    assert not line.isVisibleTo(dash) and line.text() == ""


def test_no_evidence_says_so(dash: Any) -> None:
    dash.engine_fake._dispatch(P.Done("r1", "", "length", _reply(dash.slow_line, 0.3, None)))
    assert "no evidence was recorded for this reply" in dash.slow_line.text()
