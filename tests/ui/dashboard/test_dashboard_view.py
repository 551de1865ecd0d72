"""The dashboard on its own: history plots, memory bar, roofline and the live ITL histogram as replies come
and go."""

from __future__ import annotations

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.core.predict.machine_roofs import MachineRoofs
from fake_engine import gemma_loaded

pytestmark = pytest.mark.gui


def test_dashboard_shows_history_memory_and_roofline(qtbot):
    from app.engine import protocol as P
    from app.ui.dashboard import Dashboard
    from app.ui.engine_link.engine_qt import EngineQt
    from app.ui.window.engine_events import quant_of

    engine = EngineQt()
    dash = Dashboard(engine)
    qtbot.addWidget(dash)
    loaded = gemma_loaded()
    assert quant_of(loaded) == "Q4_K_M"  # type: ignore[arg-type]
    dash.set_loaded(loaded)  # type: ignore[arg-type]
    history = [PhaseMetrics(prompt_tokens=p, reused_tokens=r, prefill_tokens=p - r, prefill_ms=(p - r) * 3.0,
                            ttft_ms=(p - r) * 3.0 + 20, decode_tokens=30, decode_ms=30 * d, generated_tokens=31,
                            itl_ms=[d] * 30, kv_cells_used=p + 31, kv_bytes_used=(p + 31) * 18432)
               for p, r, d in ((20, 0, 25.0), (80, 51, 28.0), (150, 111, 30.0))]
    dash.set_history(history[:2])
    dash.add_metrics(history[2])
    assert dash.card_decode.value.text() == "33.3 tok/s"  # the numbers at once, the plots a frame later
    qtbot.waitUntil(lambda: len(dash.curve_prefill.getData()[0]) == 3, timeout=2000)
    assert dash.itl_lines[0].label.format == "p50 28 ms"  # still the previous reply's histogram
    qtbot.waitUntil(lambda: dash.itl_lines[0].label.format == "p50 30 ms", timeout=2000)
    xs, ys = dash.curve_prefill.getData()
    assert list(xs) == [1, 2, 3] and ys[0] == pytest.approx(history[0].prefill_tps)
    assert list(dash.curve_decode.getData()[1]) == pytest.approx([1000 / 25, 1000 / 28, 1000 / 30])
    assert dash.card_prompt.detail.text() == "39 new · 111 reused"
    assert dash.card_decode.value.text() == "33.3 tok/s"
    dash.on_stats(P.Stats(rss_bytes=500 << 20, kv_cells_used=181, kv_cells_allocated=4096,
                          kv_bytes_used=181 * 18432, kv_bytes_allocated=72 << 20, loaded=True))
    assert dash.kv_bar.value() == 181 and "headroom 3915 tokens" in dash.kv_label.text()
    assert "512 tokens" in dash.swa_label.text()
    # Without a bandwidth measurement the roofline says so; with one, decode sits under the slope.
    assert "not measured yet" in dash.roof_label.text()
    dash.set_machine_roofs(MachineRoofs(13e9, 0.0, 2, "2026-12-01T12:00:00+00:00", busy=False, calibrated=False))
    (dx,), (dy,) = 10 ** dash.roof_decode.getData()[0], 10 ** dash.roof_decode.getData()[1]  # log-log plot
    (px,), (py,) = 10 ** dash.roof_prefill.getData()[0], 10 ** dash.roof_prefill.getData()[1]
    assert px == pytest.approx(39 * dx)  # prefill batch of 39 new tokens through the same weights
    assert dy < 13e9 * dx and "% of the roof" in dash.roof_label.text()
    assert py == pytest.approx(history[2].prefill_tps * 2 * 268_000_000)
    # Histogram ranges move in 1-2-2.5-5 steps, so live updates rarely redraw the axes.
    from app.ui.dashboard import nice_ceiling

    assert [nice_ceiling(v) for v in (0.9, 1.0, 1.01, 2.2, 30, 51, 0.03)] == pytest.approx(
        [1, 1, 2, 2.5, 50, 100, 0.05])
    # The live histogram follows streamed token timestamps.
    dash.start_reply()
    dash.on_tokens([0.0, 0.02, 0.04])
    dash.on_tokens([0.07])
    assert sum(dash.itl_bars.opts["height"]) == 2  # the first batch is drawn at once
    qtbot.waitUntil(lambda: sum(dash.itl_bars.opts["height"]) == 3, timeout=2000)  # later ones ≤ 2×/s
    assert dash.card_itl.value.text() == "20.0 ms" and "p99 29.8" in dash.card_itl.detail.text()
    assert dash.card_itl.detail.toolTip() == dash.card_itl.detail.text()  # readable on hover when cut
    # A reply that starts right after another ended (its plots still a frame away) draws those plots first,
    # and the finished reply's histogram never lands on the new reply's.
    dash.add_metrics(history[0])
    dash.start_reply()
    assert len(dash.curve_decode.getData()[0]) == 4
    dash.on_tokens([1.0, 1.01])
    qtbot.wait(100)
    assert sum(dash.itl_bars.opts["height"]) == 1 and dash.itl_lines[0].label.format == "p50 10 ms"
