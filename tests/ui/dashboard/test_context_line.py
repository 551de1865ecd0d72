"""The dashboard says when the context filled and how many tokens were dropped: the overflow metrics of a
reply (as `roofline chat --ctx 128 -n 300 --context-overflow rolling|stop` reports them on the default model)
reach the prompt card of the window's dashboard, played through the fake engine; a draft's measured
speed-up reaches the decode card."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.core.chat.store import ChatStore
from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from app.ui.dashboard.context_line import context_line
from fake_window import make_window

pytestmark = pytest.mark.gui

BASE = PhaseMetrics(prompt_tokens=5, prefill_tokens=5, prefill_ms=10.0, ttft_ms=12.0, decode_tokens=299,
                    decode_ms=3000.0, generated_tokens=300, itl_ms=[10.0] * 299).to_dict()
ROLLED = {**BASE, "context_overflow": "rolling", "context_keep": 5, "context_prompt_dropped": 0,
          "context_shifts": 3, "context_dropped": 183, "context_shift_at": [124, 185, 246]}
STOPPED = {**BASE, "generated_tokens": 123, "context_overflow": "stop", "context_shifts": 0,
           "context_dropped": 0}


def test_the_line_says_when_and_how_many() -> None:
    assert context_line(ROLLED) == "context full at tok 124, 185, 246: rolled ×3, 183 tok dropped"
    assert context_line(STOPPED, "context_full") == "context full at tok 123: reply stopped"
    assert context_line({**BASE, "context_prompt_dropped": 40}) == "prompt cut: 40 tok dropped"
    assert context_line(BASE, "length") == "" and context_line({"context_shifts": "x"}) == ""


@pytest.mark.parametrize(("metrics", "reason", "expected"), [
    (ROLLED, "length", "rolled ×3, 183 tok dropped"),
    (STOPPED, "context_full", "context full at tok 123: reply stopped"),
])
def test_the_windows_dashboard_shows_it(qtbot, tmp_path: Path, metrics: dict, reason: str,
                                        expected: str) -> None:
    from fake_engine import loaded_event

    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store)
    win.show()
    try:
        win.engine._dispatch(loaded_event())
        win.input.setPlainText("Once upon a time")
        win.submit()
        rid = win.engine.active_request
        assert rid is not None
        win.engine._on_reader_event(P.Token(rid, "Once", 0, time.monotonic()))
        win.engine.drain_tokens()
        win.engine._dispatch(P.Done(rid, "", reason, metrics))
        detail = win.dashboard.card_prompt.detail.text()
        assert detail.startswith("5 new · 0 reused") and detail.endswith(expected)
    finally:
        win.close()
        store.close()


DRAFTED = {**PhaseMetrics(prompt_tokens=5, prefill_tokens=5, prefill_ms=10.0, ttft_ms=12.0, decode_tokens=39,
                          decode_ms=5429.0, generated_tokens=40, itl_ms=[110.0] * 39, draft_tokens=8,
                          draft_accepted=1).to_dict(), "lookup_speedup": 0.67}


def test_the_decode_card_gives_the_measured_draft_speed_up(qtbot, tmp_path: Path) -> None:
    # The same card as the context line, for speculative decoding: acceptance and the speed-up measured in the
    # reply (0.67: a slowdown, as `roofline chat --draft-model` measured it on the default model).
    from app.ui.dashboard.speculative_line import speedup_line

    assert speedup_line(DRAFTED) == "measured ×0.67 vs plain decode"
    assert speedup_line({**DRAFTED, "draft_tokens": 0}) == "" and speedup_line(BASE) == ""
    from app.ui.dashboard import Dashboard
    from fake_engine import fake_engine

    engine = fake_engine()
    dash = Dashboard(engine)
    qtbot.addWidget(dash)
    dash.add_metrics(PhaseMetrics.from_dict(DRAFTED))
    dash.show_reply_lines(DRAFTED, "length")
    detail = dash.card_decode.detail.text()
    assert "12 % accepted" in detail and detail.endswith("measured ×0.67 vs plain decode")
