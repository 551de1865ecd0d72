"""A window of scrapes: each measured against the oldest of the last minute, the gauges kept as a series."""

from __future__ import annotations

import pytest

from app.core.remote.engines import LLAMA, SPECS
from app.core.remote.exposition import read_exposition
from app.core.remote.watch import ServerWatch


def scrape(t: float, tokens: float, running: int) -> object:
    text = (f"llamacpp:tokens_predicted_total {tokens}\nllamacpp:tokens_predicted_seconds_total {tokens / 50}\n"
            f"llamacpp:requests_processing {running}\nllamacpp:requests_deferred 0\n")
    return read_exposition(text, t)


def test_the_window_is_the_last_minute():
    watch = ServerWatch(SPECS[LLAMA], window_s=60.0)
    first = watch.add(scrape(0.0, 0, 0))
    assert first.window_s is None  # since the server started
    watch.add(scrape(30.0, 3000, 1))
    m = watch.add(scrape(60.0, 6000, 2))
    assert m.window_s == pytest.approx(60.0) and m.generation_tps_total == pytest.approx(100.0)
    # 90 s: the scrape at 30 s is the oldest within the minute; the one at 0 s is gone
    m = watch.add(scrape(90.0, 6000, 0))
    assert m.window_s == pytest.approx(60.0) and m.generation_tps_total == pytest.approx(50.0)
    assert [p.running for p in watch.history] == [0, 1, 2, 0]


def test_a_restarted_server_counts_from_its_new_totals():
    watch = ServerWatch(SPECS[LLAMA])
    watch.add(scrape(0.0, 10_000, 1))
    m = watch.add(scrape(10.0, 500, 1))
    assert m.generation_tps_total == pytest.approx(50.0)
