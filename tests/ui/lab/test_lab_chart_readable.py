"""The Lab's sweep chart is readable (a QA pass: its title, axes, legend and bar labels were pyqtgraph's light
grey on white, and before a run it was bare 0–1 axes): its text reaches 4.5:1 on its background in both
themes, following View ▸ Theme, and before a run it says there is no data yet."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from app.core.bench.sweeps import Measurement, Step, SweepResult
from app.ui.toolkit import theme
from contrast import TEXT_CONTRAST, chart_text_colors, contrast_ratio, text_color

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("system_theme_after")]

def _grid() -> SweepResult:
    """A finished local grid sweep: ppP, then tgG at depth P, for two prompts and two answer lengths."""
    ms = [Measurement(Step(p, 0), [int(p * 1e6)], {}) for p in (128, 512)]
    ms += [Measurement(Step(0, g, p), [int(g * 3e7)], {}) for p in (128, 512) for g in (16, 64)]
    return SweepResult(kind="grid", measurements=ms, points=[], finding="")


GRID = _grid()


def _open_lab(window: Any) -> Any:
    window.pages.setCurrentWidget(window.lab_page)  # the Lab tab, clicked
    return window.lab_page.ensure()


def _switch_theme(window: Any, name: str) -> None:
    window.menus.theme_actions[name].trigger()
    QApplication.processEvents()


@pytest.mark.parametrize("name", ["light", "dark"])
def test_the_sweep_chart_text_is_readable_in_both_themes(window, qtbot, name: str) -> None:
    lab = _open_lab(window)
    other = "dark" if name == "light" else "light"
    _switch_theme(window, other)
    lab._on_finished(GRID)  # a finished grid sweep: title, axes, legend and labelled bars
    _switch_theme(window, name)  # the chart follows the switch
    base = QColor(theme.colors().base)
    texts = chart_text_colors(lab.plot)
    assert any(k.startswith("legend") for k in texts) and any(k.startswith("bar label") for k in texts)
    for what, color in texts.items():
        assert contrast_ratio(color, base) >= TEXT_CONTRAST, f"{what} {color.name()} on {base.name()} ({name})"


@pytest.mark.parametrize("name", ["light", "dark"])
def test_before_a_run_the_chart_says_there_is_no_data(window, qtbot, name: str) -> None:
    lab = _open_lab(window)
    _switch_theme(window, name)
    hint = lab.empty_hint
    assert hint.isVisible() and "no data yet: run a sweep" in hint.text()
    base = QColor(theme.colors().base)
    assert contrast_ratio(text_color(hint), base) >= TEXT_CONTRAST
    axes = chart_text_colors(lab.plot)
    assert all(contrast_ratio(axes[f"{a} axis"], base) >= TEXT_CONTRAST for a in ("left", "bottom"))
    lab._on_finished(GRID)
    assert not hint.isVisible()
