"""The sweep chart outside the UI package: `roofline sweep --png` renders without importing app.ui, and the
Lab page draws with the same code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys
from app.commands import sweep  # noqa: F401 - the command module itself must not pull in the UI
from app.charts.sweep_chart import render_png
from app.core.bench.sweeps import Measurement, Step, analyse

def m(step, ms):
    return Measurement(step, [int(ms * 1e6)] * 2, {"n_threads": 2})

ms = [m(Step(64, 0), 64), m(Step(0, 32, 64), 400), m(Step(512, 0), 512), m(Step(0, 32, 512), 420)]
render_png(analyse("grid", ms), sys.argv[1])
print("UI:", sorted(name for name in sys.modules if name == "app.ui" or name.startswith("app.ui.")))
"""


def test_sweep_png_renders_without_the_ui_package(tmp_path: Path) -> None:
    out = tmp_path / "grid.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert [line for line in res.stdout.splitlines() if line.startswith("UI:")] == ["UI: []"]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


@pytest.mark.gui
def test_the_lab_page_draws_with_the_shared_chart(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import pyqtgraph as pg

    from app.core.bench.sweeps import Measurement, Step, analyse
    from app.ui.lab.page import LabPage

    page = LabPage(model_path=str(tmp_path / "none.gguf"))
    qtbot.addWidget(page)
    ms = [Measurement(Step(n, 0), [int(n * 1e6)] * 2, {"n_threads": 2}) for n in (64, 128)]
    ms += [Measurement(Step(0, 32, n), [int(400e6)] * 2, {"n_threads": 2}) for n in (64, 128)]
    page.finished.emit(analyse("grid", ms))
    bars = [it for it in page.plot.getPlotItem().items if isinstance(it, pg.BarGraphItem)]
    assert len(bars) == 2 and page.plot.getPlotItem().titleLabel.text.startswith("Prompt × answer length")
