"""The ITL histogram's percentile markers are where their labels say, or say they are off the scale: its range
ends at 3× the median so that a stall does not squash the bulk, and a p99 stall past that ("p99 568 ms" on an
axis ending at 200 ms) was drawn at the edge as if it were 200 ms. Through the fake engine."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from chat_drive import prefilled, send, tokens

pytestmark = pytest.mark.gui


def _reply(win: Any, qtbot: Any, gaps_ms: list[float]) -> tuple[float, list[Any]]:
    """A reply with these token gaps, ended: the histogram's x range (its right end) and its two markers."""
    rid = send(win, "go")
    prefilled(win, rid)
    tokens(win, rid, "a", "b")
    m = PhaseMetrics(prompt_tokens=20, prefill_tokens=20, prefill_ms=40.0, ttft_ms=45.0,
                     decode_tokens=len(gaps_ms), decode_ms=sum(gaps_ms), generated_tokens=len(gaps_ms) + 1,
                     itl_ms=gaps_ms)
    win.engine._dispatch(P.Done(rid, "", "stop", m.to_dict()))
    dash = win.dashboard
    qtbot.waitUntil(lambda: dash._itl_gaps == gaps_ms, timeout=3000)  # the finished reply's histogram is drawn
    return dash.plot_itl.getViewBox().viewRange()[0][1], dash.itl_lines


def test_a_p99_past_the_range_is_marked_off_the_scale(win: Any, qtbot: Any) -> None:
    right, (p50, p99) = _reply(win, qtbot, [40.0] * 95 + [568.0] * 5)
    assert right < 568  # the stall is past the range: the bulk keeps its resolution
    assert p99.value() <= right and p99.label.format == "p99 568 ms →"
    assert p50.value() == pytest.approx(40.0) and p50.label.format == "p50 40 ms"


def test_markers_in_the_range_are_at_their_values(win: Any, qtbot: Any) -> None:
    right, (_p50, p99) = _reply(win, qtbot, [40.0] * 95 + [60.0] * 5)
    assert p99.value() == pytest.approx(60.0) and p99.value() < right and p99.label.format == "p99 60 ms"
