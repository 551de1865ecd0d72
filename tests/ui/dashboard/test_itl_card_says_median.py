"""The Inter-token latency card says which number it shows: the median of the reply's token gaps, with their
mean beside it. The median alone ("39.0 ms" beside Decode's "224 tok in 12040 ms", 53.8 ms a token) read as
contradicting the Decode card. A reply with uneven gaps, live and finished, through the fake engine."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from chat_drive import prefilled, send, tokens

pytestmark = pytest.mark.gui

GAPS_MS = [40.0] * 9 + [400.0]  # one stall: median 40 ms, mean 76 ms


def test_the_itl_card_names_its_median_and_gives_the_mean(win: Any) -> None:
    rid = send(win, "uneven please")
    prefilled(win, rid)
    t0 = time.monotonic()
    times = [t0]
    for gap in GAPS_MS:
        times.append(times[-1] + gap / 1000.0)
    for i, t in enumerate(times):  # one at a time, as they stream
        tokens(win, rid, f"w{i} ", t0=t)
    card = win.dashboard.card_itl
    win.dashboard._refresh_live()  # the paced refresh, now
    assert card.value.text() == "40.0 ms"
    assert card.detail.text().startswith("median · mean 76.0 ms · p95 ")
    m = PhaseMetrics(prompt_tokens=20, prefill_tokens=20, prefill_ms=40.0, ttft_ms=45.0, decode_tokens=10,
                     decode_ms=sum(GAPS_MS), generated_tokens=11, itl_ms=GAPS_MS)
    win.engine._dispatch(P.Done(rid, "", "stop", m.to_dict()))
    assert card.value.text() == "40.0 ms"
    assert card.detail.text().startswith("median · mean 76.0 ms · p95 ")
    assert win.dashboard.card_decode.value.text() == f"{1000 / 76.0:.1f} tok/s"  # the mean is its time a token
