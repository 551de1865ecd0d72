"""The server's own phases placed against the remote GPU's roofs, and a plain 'unknown' without them."""

from __future__ import annotations

import pytest

from app.core.remote.measures import ServerMeasures
from app.core.remote.roofline import remote_roofline


def _m(prefill: float | None, decode: float | None) -> ServerMeasures:
    return ServerMeasures("vllm", "vLLM", 1.0, 60.0, prefill_tps=prefill, decode_tps=decode)


def test_points_use_the_servers_rates_and_the_remote_roofs():
    r = remote_roofline(_m(4000.0, 50.0), n_params=8_000_000_000, model_bytes=16_000_000_000,
                        bandwidth=4.8e12, peak_flops=9.9e14, batch=256)
    assert not r.unknown and r.decode is not None and r.prefill is not None
    assert r.decode == pytest.approx((1.0, 50.0 * 1.6e10))  # 2 FLOPs a parameter, 2 bytes a parameter
    assert r.prefill == pytest.approx((256.0, 4000.0 * 1.6e10))
    assert r.roof(1.0) == pytest.approx(4.8e12) and r.roof(1e4) == pytest.approx(9.9e14)
    # the decode point sits under the bandwidth slope of the remote machine
    assert r.decode[1] <= (r.roof(r.decode[0]) or 0)


@pytest.mark.parametrize("bandwidth", [None, 0.0, -1.0])
def test_without_a_bandwidth_the_roofline_is_unknown(bandwidth):
    r = remote_roofline(_m(4000.0, 50.0), 8_000_000_000, 16_000_000_000, bandwidth)
    assert r.prefill is None and r.decode is None and r.roof(1.0) is None
    assert "remote machine's roofline is unknown" in r.unknown


def test_no_phases_or_no_model_size_say_why():
    assert "not reported" in remote_roofline(None, 8, 16, 1e12).unknown
    assert "size is unknown" in remote_roofline(_m(1.0, 1.0), 0, 16, 1e12).unknown
    assert "no prefill or decode" in remote_roofline(_m(None, None), 8, 16, 1e12).unknown
