"""The Lab's chart after a cancelled sweep, and its PNG export: no automatic "(x0.001)" axis suffix on an
empty or sub-1 range, and the exported PNG carries the finding under the chart as the page shows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.core.bench.sweeps import SweepResult

pytestmark = pytest.mark.gui


def depth_result(finding: str, cancelled: bool = False, tps: float = 0.4) -> SweepResult:
    points = [{"n_depth": d, "decode_tps": tps * (1 - d / 4096)} for d in (0, 1024)]
    return SweepResult(kind="depth", measurements=[], points=points, finding=finding, cancelled=cancelled)


@pytest.fixture
def page(qtbot, tmp_path: Path):
    from app.ui.lab.page import LabPage

    page = LabPage(model_path=str(tmp_path / "none.gguf"))
    qtbot.addWidget(page)
    page.resize(900, 700)
    page.show()
    return page


def test_cancelled_sweep_chart_has_no_scale_suffix(page) -> None:
    for result in (SweepResult(kind="ubatch", measurements=[], points=[], finding="", cancelled=True),
                   depth_result("Cancelled.", cancelled=True)):
        page._on_finished(result)
        QApplication.processEvents()
        titles = [page.plot.getAxis(name).labelString() for name in ("left", "bottom")]
        assert all("(x" not in t for t in titles), titles


def test_exported_png_includes_the_finding(page, tmp_path: Path) -> None:
    images = []
    finding_text = "Decode slows by half from depth 0 to 1024: the KV cache is read for every token."
    for i, finding in enumerate(("", finding_text)):
        page._on_finished(depth_result(finding, tps=50.0))
        path = tmp_path / f"sweep-{i}.png"
        page.export(png_path=path)
        images.append(QImage(str(path)))
    assert not images[0].isNull() and not images[1].isNull()
    assert images[0] != images[1], "the finding is not in the exported PNG"
