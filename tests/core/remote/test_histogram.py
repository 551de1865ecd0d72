"""Percentiles from bucket counters, as histogram_quantile reads them."""

from __future__ import annotations

import math

import pytest

from app.core.remote.histogram import distribution, quantile, window_buckets

INF = math.inf


def test_quantile_interpolates_inside_the_bucket():
    # 10 observations in (0, 1], 10 in (1, 2]: the median is the first bucket's top, p75 halfway up the second
    buckets = [(1.0, 10.0), (2.0, 20.0), (INF, 20.0)]
    assert quantile(buckets, 0.5) == pytest.approx(1.0)
    assert quantile(buckets, 0.75) == pytest.approx(1.5)
    assert quantile(buckets, 0.25) == pytest.approx(0.5)


def test_a_rank_in_the_inf_bucket_is_the_last_bound():
    assert quantile([(1.0, 1.0), (INF, 10.0)], 0.99) == 1.0


def test_window_subtracts_the_earlier_scrape():
    before = {0.1: 5.0, 1.0: 5.0, INF: 5.0}
    now = {0.1: 5.0, 1.0: 9.0, INF: 9.0}
    d = distribution(now, before, 2.5, 0.5)
    assert d is not None and d.count == 4
    assert 100 <= d.p50_ms <= 1000  # the 4 new ones are all in (0.1, 1]: the 5 old fast ones are gone
    assert d.mean_ms == pytest.approx(500.0)


def test_a_restart_reads_the_new_totals():
    before = {1.0: 50.0, INF: 50.0}
    now = {1.0: 3.0, INF: 3.0}
    d = distribution(now, before, 1.5, 40.0)
    assert d is not None and d.count == 3 and d.mean_ms == pytest.approx(500.0)


@pytest.mark.parametrize("now", [{1.0: 5.0}, {1.0: 5.0, INF: 3.0}, {}])
def test_broken_buckets_give_nothing(now):
    assert window_buckets(now, None) is None or distribution(now, None, None, None) is None


def test_nothing_observed_is_none():
    same = {1.0: 4.0, INF: 4.0}
    assert distribution(same, dict(same), 2.0, 2.0) is None
