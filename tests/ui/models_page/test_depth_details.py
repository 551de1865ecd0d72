"""The Library's details for the selected model: the predicted decode speed by context depth with the user's
measured points drawn on it, and the context-from-use line (app.ui.models_page.depth_panel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.bench.zoo import zoo_path
from app.core.chat.model_usage import MeasuredPoint, ModelUsage
from app.core.config import paths
from app.core.config.settings import Settings, save_settings

pytestmark = pytest.mark.gui


@pytest.fixture
def page(qtbot: Any) -> Any:
    from app.ui.models_page import ModelsPage

    p = ModelsPage()
    p.resize(1100, 800)
    yield p
    p.shutdown()
    qtbot.waitUntil(lambda: not p.busy(), timeout=20000)
    p.close()
    p.deleteLater()


def _select(page: Any, qtbot: Any, name: str) -> None:
    page.refresh_library()
    qtbot.waitUntil(lambda: any(page.library_model.row(page.library_model.index(r, 0)).path.name == name
                                for r in range(page.library_model.rowCount())), timeout=15000)
    for r in range(page.library_model.rowCount()):
        if page.library_model.row(page.library_model.index(r, 0)).path.name == name:
            page.library_view.selectRow(r)


def test_details_show_the_curve_the_chats_and_the_context_advice(page: Any, qtbot: Any) -> None:
    path = zoo_path("llama-3.2-1b", "Q4_K_M", paths.models_dir())
    save_settings(Settings(n_ctx=16384))
    usage = ModelUsage(replies=4, max_tokens=1000, points=[MeasuredPoint(300.0, 21.0), MeasuredPoint(900.0, 19.5)])
    asked: list[str] = []
    page.usage_of = lambda p: asked.append(p) or usage
    _select(page, qtbot, path.name)
    panel = page.depth_panel
    qtbot.waitUntil(lambda: panel.plot.isVisibleTo(page), timeout=20000)
    assert asked == [str(path)]
    text = panel.label.text()
    assert text.startswith("decode at 0: ") and "at 16k: " in text and "16 full-attention layers" in text
    assert "your chats measured 21 tok/s at 300 … 20 tok/s at 900 (2 replies)" in text  # 19.5 shown as 20
    assert "your chats with this model reached 1k tokens; 2k would free " in text
    xs, ys = panel.predicted.getData()
    assert list(xs) == [0, 1024, 2048, 4096, 8192, 16384] and all(a > b for a, b in zip(ys, ys[1:], strict=False))
    mx, my = panel.measured.getData()
    assert list(mx) == [300.0, 900.0] and list(my) == [21.0, 19.5]


def test_no_chats_no_points_and_no_advice(page: Any, qtbot: Any, tmp_path: Path) -> None:
    path = zoo_path("llama-3.2-1b", "Q4_K_M", paths.models_dir())
    page.usage_of = lambda p: ModelUsage()
    _select(page, qtbot, path.name)
    qtbot.waitUntil(lambda: page.depth_panel.plot.isVisibleTo(page), timeout=20000)
    text = page.depth_panel.label.text()
    assert "your chats" not in text and text.startswith("decode at 0: ")
    assert len(page.depth_panel.measured.getData()[0]) == 0
