"""The roofline's arithmetic: where prefill and decode sit (intensity, FLOP/s) and the roof they sit under."""

from __future__ import annotations

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.core.predict.machine_roofs import MachineRoofs
from app.ui.dashboard import roofline_math

pytestmark = pytest.mark.gui


def test_roofline_points_sit_where_physics_says():
    n_params, model_bytes = 268_000_000, 250_000_000
    m = PhaseMetrics(prefill_tokens=256, prefill_ms=800.0, decode_tokens=100, decode_ms=2500.0, kv_bytes_used=0)
    prefill, decode = roofline_math.operating_points(m, n_params, model_bytes, n_ubatch=512)
    assert decode is not None and prefill is not None
    assert decode.intensity == pytest.approx(2 * n_params / model_bytes)
    assert prefill.intensity == pytest.approx(256 * decode.intensity)
    assert decode.flops == pytest.approx(40.0 * 2 * n_params)  # 40 tok/s
    # Intensity stops growing at the micro-batch: weights are re-read for every ubatch.
    p_small_ubatch, _ = roofline_math.operating_points(m, n_params, model_bytes, n_ubatch=64)
    assert p_small_ubatch is not None and p_small_ubatch.intensity == pytest.approx(64 * decode.intensity)
    # a machine whose compute roof is unknown: the best prefill stands in for it
    machine = MachineRoofs(13e9, 0.0, 2, "2026-12-01T12:00:00+00:00", busy=False, calibrated=False)
    r = roofline_math.build([m], n_params, model_bytes, machine)
    assert r.peak_flops == pytest.approx(prefill.flops) and r.peak_source.startswith("best prefill")
    assert r.roof(decode.intensity) == pytest.approx(13e9 * decode.intensity)  # decode: under the slope
    assert decode.flops < r.roof(decode.intensity)  # type: ignore[operator]
    assert r.ridge is not None and decode.intensity < r.ridge
    assert roofline_math.build([], n_params, model_bytes, None).roof(1.0) is None


def test_the_machine_gives_both_roofs_and_says_where_they_come_from():
    m = PhaseMetrics(prefill_tokens=256, prefill_ms=800.0, decode_tokens=100, decode_ms=2500.0)
    machine = MachineRoofs(20e9, 150e9, 2, "2026-12-01T12:00:00+00:00", busy=True, calibrated=False)
    r = roofline_math.build([m], 268_000_000, 250_000_000, machine)
    assert (r.bandwidth, r.peak_flops) == (20e9, 150e9)
    assert r.peak_source == r.bandwidth_source == "measured 2026-12-01, while busy: low · 2 threads"
