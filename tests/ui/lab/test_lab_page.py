"""The Lab page, offscreen: a real prompt × answer sweep on the default model with progress and a stacked
chart, cancel mid-sweep, bad input, and the PNG export."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
import pytest

from app.core.bench.sweeps import SweepResult
from app.ui.lab.page import LabPage

pytestmark = [pytest.mark.gui]


def _page(qtbot, model: Path) -> LabPage:  # type: ignore[no-untyped-def]
    page = LabPage(model_path=str(model))
    qtbot.addWidget(page)
    page.resize(900, 700)
    # One thread: on a busy 2-core machine two spinning llama.cpp threads slow each other down 10x.
    page.load_overrides = {"n_threads": 1, "n_threads_batch": 1}
    return page


@pytest.mark.model
def test_grid_sweep_runs_off_the_gui_thread_and_draws_stacked_bars(qtbot, default_model: Path,
                                                                   tmp_path: Path) -> None:
    page = _page(qtbot, default_model)
    page.prompts.setText("16,64,128")
    page.gens.setText("4,8")
    page.reps.setValue(1)
    steps: list[tuple[int, int, str]] = []
    page.progressed.connect(lambda i, n, s: steps.append((i, n, s)))
    with qtbot.waitSignal(page.finished, timeout=300_000) as blocker:
        page.run_button.click()
        assert page.running and not page.run_button.isEnabled() and page.cancel_button.isEnabled()
    result: SweepResult = blocker.args[0]
    assert not result.cancelled and len(result.measurements) == 9
    assert steps[-1] == (9, 9, "done") and page.progress.value() == 9
    assert page.finding.text() == result.finding and "tok/s" in result.finding
    bars = [it for it in page.plot.getPlotItem().items if isinstance(it, pg.BarGraphItem)]
    assert len(bars) == 4  # prefill + decode for each of the 2 answer lengths
    # stacked: each decode bar starts where its prefill bar ends
    pre, dec = bars[0].opts, bars[1].opts
    assert list(dec["y0"]) == list(pre["height"])
    lines = [it for it in page.plot.getPlotItem().items if isinstance(it, pg.InfiniteLine)]
    assert (result.crossover is not None) == bool(lines)
    page.export(json_path=tmp_path / "lab.json", csv_path=tmp_path / "lab.csv", png_path=tmp_path / "lab.png")
    assert (tmp_path / "lab.png").stat().st_size > 5000
    assert page.run_button.isEnabled() and not page.cancel_button.isEnabled()


@pytest.mark.model
def test_cancel_stops_the_sweep_and_keeps_what_was_measured(qtbot, default_model: Path) -> None:
    page = _page(qtbot, default_model)
    page.prompts.setText("16,32,48,64,80,96")
    page.gens.setText("16")
    page.reps.setValue(1)
    page.progressed.connect(lambda i, n, s: page.cancel() if i == 1 else None)
    with qtbot.waitSignal(page.finished, timeout=300_000) as blocker:
        page.start_sweep()
    result: SweepResult = blocker.args[0]
    assert result.cancelled and 1 <= len(result.measurements) < 12
    assert "Cancelled" in page.status.text()


def test_bad_sizes_are_reported_without_starting(qtbot, tmp_path: Path) -> None:
    page = LabPage(model_path=str(tmp_path / "none.gguf"))
    qtbot.addWidget(page)
    page.prompts.setText("0,64")
    page.start_sweep()
    assert not page.running and "positive" in page.status.text()
    page.kind.setCurrentIndex(page.kind.findData("ubatch"))
    assert page.form.isRowVisible(page.ubatches) and not page.form.isRowVisible(page.prompts)
