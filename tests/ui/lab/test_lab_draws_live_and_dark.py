"""The Lab's charts (issue 32, item 18): drawn from the first measurement on while a sweep runs (the test lets
each measurement through, one at a time), and in the dark theme's colours after View ▸ Theme ▸ Dark, both the
sweep chart and the batching plots. The measuring is faked: a backend that answers from fixed timings."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtGui import QColor

from app.core.bench.sweeps import Measurement, run_sweep
from app.ui.toolkit import theme

pytestmark = pytest.mark.gui


class GatedBackend:
    """A sweep backend whose each measurement waits for the test to let it through."""

    remote = False

    def __init__(self) -> None:
        self.gate = threading.Semaphore(0)

    def configure(self, config) -> None:
        pass

    def measure(self, step, repetitions) -> Measurement:
        assert self.gate.acquire(timeout=20)
        return Measurement(step, [int(1e9 * (1 + step.n_depth / 4096))] * repetitions, {}, tokens=step.n_gen or 32)

    def describe(self) -> dict:
        return {"timing": "fixed timings"}


@pytest.fixture
def lab(window, qtbot, monkeypatch):
    from app.ui.lab.page import LabPage

    backend = GatedBackend()
    monkeypatch.setattr(LabPage, "_sweep_local", lambda self, base, kind, steps, reps, cancel: run_sweep(
        kind, steps, backend, reps, self._progress, cancel.is_set, self._partial))
    window.pages.setCurrentWidget(window.lab_page)  # the Lab tab, clicked
    page = window.lab_page.ensure()
    page.backend = backend
    yield page
    backend.gate.release(100)
    qtbot.waitUntil(lambda: not page.running, timeout=20000)
    from app.ui.window.menus import win_set_theme

    win_set_theme(window, "system")


def drawn(plot) -> int:
    """Points on the chart: of its curves and scatters."""
    total = 0
    for item in plot.getPlotItem().listDataItems():
        xs = item.getData()[0]
        total += 0 if xs is None else len(xs)
    return total


def test_the_sweep_chart_grows_as_points_come(lab, qtbot) -> None:
    lab.kind.setCurrentIndex(lab.kind.findData("depth"))
    lab.depths.setText("0,1024,2048")
    lab.reps.setValue(1)
    lab.run_button.click()
    assert lab.running and drawn(lab.plot) == 0
    lab.backend.gate.release()
    qtbot.waitUntil(lambda: drawn(lab.plot) > 0 or not lab.running, timeout=10000)
    assert lab.running, lab.status.text()
    first = drawn(lab.plot)
    assert lab.running
    lab.backend.gate.release()
    qtbot.waitUntil(lambda: drawn(lab.plot) > first, timeout=10000)
    assert lab.running  # still one to go: the chart did not wait for the end
    lab.backend.gate.release()
    qtbot.waitUntil(lambda: not lab.running, timeout=10000)
    assert lab.finding.text()


def test_the_lab_charts_follow_the_dark_theme(lab, window, qtbot) -> None:
    background = lambda plot: plot.backgroundBrush().color().name()  # noqa: E731
    window.menus.theme_actions["light"].trigger()
    light = theme.colors().base
    assert background(lab.plot) == QColor(light).name()
    window.menus.theme_actions["dark"].trigger()  # View ▸ Theme ▸ Dark
    dark = theme.colors().base
    assert QColor(dark).name() != QColor(light).name()
    for plot in (lab.plot, lab.batch_lab.plot_rate, lab.batch_lab.plot_roof):
        assert background(plot) == QColor(dark).name()
    axis = lab.plot.getAxis("left")
    assert axis.textPen().color().name() == QColor(theme.colors().text).name()
