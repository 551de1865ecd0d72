"""PhaseMetrics: percentiles, rates, and summaries that never blend the two phases."""

from __future__ import annotations

import math

from app.core.metrics.phase import PhaseMetrics, fmt_bytes, percentile, rate


def test_percentile_matches_linear_interpolation() -> None:
    xs = [10.0, 20.0, 30.0, 40.0]
    assert percentile(xs, 50) == 25.0
    assert percentile(xs, 0) == 10.0 and percentile(xs, 100) == 40.0
    assert math.isclose(percentile(xs, 95), 38.5)
    assert math.isnan(percentile([], 50))


def test_rates_and_roundtrip() -> None:
    m = PhaseMetrics(prompt_tokens=100, reused_tokens=20, prefill_tokens=80, prefill_ms=200.0,
                     decode_tokens=9, decode_ms=300.0, generated_tokens=10, decode_wall_ms=450.0,
                     itl_ms=[50.0] * 9)
    assert m.prefill_tps == 400.0 and m.decode_tps == 30.0 and m.decode_wall_tps == 20.0
    assert rate(0, 10.0) == 0.0 and rate(5, 0.0) == 0.0
    back = PhaseMetrics.from_dict({**m.to_dict(), "unknown_future_field": 1})
    assert back == m


def test_local_summary_keeps_prefill_and_decode_on_separate_lines() -> None:
    m = PhaseMetrics(prompt_tokens=100, reused_tokens=20, prefill_tokens=80, prefill_ms=200.0,
                     decode_tokens=9, decode_ms=300.0, generated_tokens=10, itl_ms=[30.0] * 9,
                     kv_cells_used=109, kv_cells_allocated=4096, kv_bytes_allocated=72 * 2**20)
    lines = m.summary_lines()
    assert lines[0].startswith("prefill : 80 tok") and "80 new, 20 reused" in lines[0]
    assert lines[2].startswith("decode  : 9 tok") and "30.0 tok/s" in lines[2]
    assert any("109/4096 cells" in line and "72.0 MiB allocated" in line for line in lines)


def test_a_prompt_kept_whole_in_the_cache_claims_no_prefill_rate() -> None:
    m = PhaseMetrics(prompt_tokens=17, reused_tokens=17, decode_tokens=9, decode_ms=300.0, generated_tokens=10)
    first = m.summary_lines()[0]
    assert first.startswith("prefill : nothing evaluated") and "0 new, 17 reused" in first and "tok/s" not in first
    assert m.prefill_short == "prompt cached"


def test_remote_summary_claims_only_what_the_client_saw() -> None:
    m = PhaseMetrics(source="client-side wall clock", ttft_ms=120.0, decode_tokens=4, decode_wall_ms=100.0,
                     generated_tokens=5, itl_ms=[25.0] * 4)
    text = "\n".join(m.summary_lines())
    assert "client-side" in text and "40.0 tok/s" in text
    assert "KV cache:" not in text and "RSS" not in text and "not reported by the server" in text


def test_fmt_bytes() -> None:
    assert fmt_bytes(512) == "512 B" and fmt_bytes(1536) == "1.5 KiB" and fmt_bytes(72 * 2**20) == "72.0 MiB"


def test_the_summary_names_what_drafted() -> None:
    m = PhaseMetrics(decode_tokens=9, decode_ms=300.0, generated_tokens=10, draft_tokens=40, draft_accepted=26)
    assert "lookup  : 26/40 draft tokens accepted (65 %, prompt lookup)" in m.summary_lines()
    drafted = "\n".join(m.summary_lines(drafter="draft model"))
    assert "draft   : 26/40 draft tokens accepted (65 %, draft model)" in drafted and "lookup" not in drafted
