"""The batching lab (the Lab page's "batch" sweep): progress, cancel, the throughput plot with the predicted
curves, the roofline whose operating point moves right with the batch until it meets the compute roof, and
the finding. The measuring is faked here (app.engine.batch.sweep.measure_batch, which has its own tests); the
prediction is app.core's, with fixed uncalibrated rates; the model header is the real default model's."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.core.bench.batch_roofline import batch_roofline
from app.core.gguf.info import inspect_gguf
from app.core.predict import machine_roofs
from app.core.predict.batching import predict_batch
from app.core.predict.speed import default_rates
from app.engine.batch import sweep as batch_engine_sweep
from app.engine.batch.sweep import MeasuredPoint

MEASURED = {1: 50.0, 2: 95.0, 4: 150.0, 8: 160.0, 16: 150.0}  # gains 1.9x, 1.58x, 1.07x: stops at ~8


@pytest.fixture()
def fake_engine_sweep(monkeypatch: pytest.MonkeyPatch) -> dict:
    """measure_batch stand-in: reports progress per count, stops between counts when cancelled; `gate` (a
    semaphore), when the test sets one, is acquired before each count: the test lets counts through."""
    calls: dict = {"progress": [], "gate": None, "config": None}

    def measure_batch(base, counts, tokens=64, rounds=1, progress=None, cancelled=None, **_):
        calls["config"] = (base, counts, tokens, rounds)
        points = []
        for i, n in enumerate(counts):
            if calls["gate"] is not None:
                calls["gate"].acquire(timeout=10)
            if cancelled is not None and cancelled():
                break
            progress(i + 1, len(counts), f"{n} streams, round 1 of 1")
            calls["progress"].append(n)
            points.append(MeasuredPoint(n, MEASURED[n], MEASURED[n] / n, (MEASURED[n],)))
        return points

    monkeypatch.setattr(batch_engine_sweep, "measure_batch", measure_batch)
    return calls


@pytest.fixture()
def fake_measure(fake_engine_sweep: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The fake sweep with fixed uncalibrated rates (no stored measurement)."""
    monkeypatch.setattr(machine_roofs, "machine_figures", lambda threads=None, **_: (default_rates(None), None))
    return fake_engine_sweep


def _lab(qtbot, model: Path):  # type: ignore[no-untyped-def]
    from app.ui.lab.page import LabPage

    page = LabPage(str(model))
    qtbot.addWidget(page)
    page.show()
    page.kind.setCurrentIndex(page.kind.findData("batch"))
    return page


def test_batch_sweep_draws_rates_roofline_and_finding(qtbot, default_model: Path, fake_measure: dict) -> None:
    page = _lab(qtbot, default_model)
    lab = page.batch_lab
    assert lab.isVisible() and not page.run_button.isVisible() and not page.plot.isVisible()
    lab.tokens.setValue(16)
    lab.run_button.click()
    qtbot.waitUntil(lambda: lab.result is not None, timeout=20000)
    base, counts, tokens, _ = fake_measure["config"]
    assert base.model_path == str(default_model) and counts == [1, 2, 4, 8, 16] and tokens == 16
    assert fake_measure["progress"] == counts and lab.progress.value() == lab.progress.maximum()
    assert lab.finding.text().startswith("On this machine batching stops paying at ~8 streams")
    rows = lab.result.rows
    assert [r.aggregate_tps for r in rows] == [MEASURED[n] for n in counts]
    assert [r.per_stream_tps for r in rows] == [MEASURED[n] / n for n in counts]
    curves = {c.name(): c for c in lab.plot_rate.getPlotItem().listDataItems()}
    assert list(curves["aggregate (measured)"].getData()[1]) == [MEASURED[n] for n in counts]
    assert list(curves["per stream (measured)"].getData()[1]) == [MEASURED[n] / n for n in counts]
    assert "aggregate (predicted)" in curves and "per stream (predicted)" in curves
    roof = lab.result.roofline
    xs = [p.intensity for p in roof.points]
    assert xs == sorted(xs) and xs[-1] > roof.ridge and xs[-1] > 10 * xs[0]  # moves right, to the compute roof
    assert [p.measured_flops for p in roof.points] == pytest.approx([MEASURED[n] * roof.flops_per_token
                                                                      for n in counts])
    drawn = {c.name(): c for c in lab.plot_roof.getPlotItem().listDataItems()}
    assert len(drawn["measured"].getData()[0]) == 5 and any(n.startswith("roof:") for n in drawn)
    page.shutdown()


def test_batch_sweep_cancels_between_counts(qtbot, default_model: Path, fake_measure: dict) -> None:
    page = _lab(qtbot, default_model)
    lab = page.batch_lab
    gate = fake_measure["gate"] = threading.Semaphore(0)
    lab.run_button.click()
    assert lab.running and not lab.run_button.isEnabled()
    gate.release(2)
    qtbot.waitUntil(lambda: len(fake_measure["progress"]) == 2, timeout=10000)
    lab.cancel_button.click()
    gate.release(3)
    qtbot.waitUntil(lambda: lab.result is not None, timeout=20000)
    assert len(lab.result.rows) == 2 and lab.status.text().startswith("Cancelled.")
    assert lab.run_button.isEnabled() and not lab.cancel_button.isEnabled()


def test_bad_stream_counts_are_one_line_not_a_run(qtbot, default_model: Path, fake_measure: dict) -> None:
    page = _lab(qtbot, default_model)
    page.batch_lab.streams.setText("1,two,4")
    page.batch_lab.run_button.click()
    assert not page.batch_lab.running and fake_measure["config"] is None
    assert "stream counts from 1 to 64" in page.batch_lab.status.text()


def test_roofline_points_move_right_with_the_batch_and_meet_the_compute_roof(default_model: Path) -> None:
    info, rates = inspect_gguf(default_model), default_rates(None)
    counts = [1, 2, 4, 8, 16, 32, 128]
    roof = batch_roofline(info, rates, predict_batch(info, rates, counts), {1: 10.0})
    x = [p.intensity for p in roof.points]
    assert x[1] / x[0] == pytest.approx(2.0, rel=0.05) and x[-1] / x[0] > 20
    assert roof.roof(roof.ridge) == pytest.approx(roof.peak_flops)
    assert roof.roof(roof.ridge / 2) == pytest.approx(roof.peak_flops / 2)
    for p in roof.points:  # the prediction never rises above either roof
        assert p.predicted_flops <= roof.roof(p.intensity) * 1.0001
    assert roof.points[-1].predicted_flops > 0.8 * roof.peak_flops  # the big batch is at the compute roof
    assert roof.points[0].measured_flops == pytest.approx(10.0 * roof.flops_per_token)
    assert roof.points[1].measured_flops is None


def test_the_lab_and_the_dashboard_show_one_measurement_of_the_machine(
        qtbot, default_model: Path, fake_engine_sweep: dict) -> None:
    """The same model and threads: the Lab's batching roofline and the dashboard's Roofline box give the same
    two roofs, with the stored measurement's date."""
    from app.ui.dashboard import Dashboard
    from app.ui.dashboard.bandwidth_feed import BandwidthFeed
    from app.ui.engine_link.engine_qt import EngineQt
    from fake_engine import gemma_loaded

    page = _lab(qtbot, default_model)
    lab = page.batch_lab
    lab.streams.setText("1,2")
    lab.run_button.click()
    qtbot.waitUntil(lambda: lab.result is not None, timeout=20000)
    note = lab.result.roofline.note
    dash = Dashboard(EngineQt())
    qtbot.addWidget(dash)
    loaded = gemma_loaded(model_path=str(default_model), n_threads=lab.base.n_threads)  # the Lab's threads
    dash.set_loaded(loaded)
    feed = BandwidthFeed(dash, dash)
    feed.request(loaded, measure=True)
    qtbot.waitUntil(lambda: "GB/s" in dash.roof_label.text(), timeout=10000)
    shown = lab.roof_note.text()
    assert shown.startswith("Bandwidth roof: ") and "(measured 2026-12-01" in shown and note in shown
    assert dash.roof_label.text().startswith(shown), (dash.roof_label.text(), shown)
    page.shutdown()


def test_the_batching_plots_text_is_readable_without_a_theme_switch(qtbot, default_model: Path,
                                                                     fake_measure: dict) -> None:
    """The batching plots took the theme's text colour only after View ▸ Theme: in a window started in its
    theme, their title, axes and legend were pyqtgraph's light grey on white (seen in the docs' screenshot)."""
    from PySide6.QtGui import QColor

    from app.ui.toolkit import theme
    from contrast import TEXT_CONTRAST, chart_text_colors, contrast_ratio

    page = _lab(qtbot, default_model)
    lab = page.batch_lab
    lab.tokens.setValue(16)
    lab.run_button.click()
    qtbot.waitUntil(lambda: lab.result is not None, timeout=20000)
    base = QColor(theme.colors().base)
    for plot in (lab.plot_rate, lab.plot_roof):
        texts = chart_text_colors(plot)
        assert any(k.startswith("legend") for k in texts)
        for what, color in texts.items():
            if what.startswith("bar label"):
                continue  # the stream counts beside the roofline's points: drawn in the text colour already
            assert contrast_ratio(color, base) >= TEXT_CONTRAST, f"{what} {color.name()} on {base.name()}"
    page.shutdown()
