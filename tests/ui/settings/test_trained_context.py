"""Settings ▸ Context size above what the model was trained for: the dialog says so plainly, and its "largest"
line reads as the trained-context cap it is, not as this machine's limit contradicting the "fits" above it
(a QA pass: 65,536 for a 32k model showed "fits this machine" over "Largest that fits: 32,768 tokens")."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.bench.zoo import zoo_path
from app.core.predict.hardware import GiB
from app.core.predict.recommend import Budget

pytestmark = pytest.mark.gui


def open_settings(window, monkeypatch, ram: int) -> object:
    """File ▸ Settings… on a machine with `ram` (whatever runs the test), captured instead of run modally."""
    from app.ui.settings.dialog import SettingsDialog

    budget = Budget(ram=ram, vram=0, unified=False, gpu=None)
    monkeypatch.setattr("app.core.predict.recommend.memory_budget", lambda hw, vram_limit=None: budget)
    opened: list[SettingsDialog] = []
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: opened.append(self) or 0)
    window.menus.settings.trigger()
    return opened[0]


def type_context(qtbot, dialog, value: int) -> None:
    dialog.n_ctx.selectAll()
    qtbot.keyClicks(dialog.n_ctx, str(value))
    qtbot.keyClick(dialog.n_ctx, Qt.Key.Key_Tab)


def test_a_context_above_the_trained_one_is_said_to_be(window, monkeypatch, qtbot, tmp_path: Path) -> None:
    model = zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path)  # trained for 32,768 tokens
    window.session.model_path = str(model)
    dialog = open_settings(window, monkeypatch, 64 * GiB)
    type_context(qtbot, dialog, 65536)
    assert dialog.n_ctx.value() == 65536
    cost, speed = dialog.ctx_cost.text(), dialog.ctx_speed.text()
    assert ": fits this machine" in cost
    assert "65,536 is above what the model was trained for (32,768): replies past that degrade" in speed
    assert "Largest that fits" not in cost and "32,768 tokens (capped at the trained context" in cost
    type_context(qtbot, dialog, 16384)
    assert "above what the model was trained for" not in dialog.ctx_speed.text()


def test_a_machine_limit_below_the_trained_context_still_reads_as_the_largest_that_fits(
        window, monkeypatch, qtbot, tmp_path: Path) -> None:
    model = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)  # trained for 131,072 tokens
    window.session.model_path = str(model)
    dialog = open_settings(window, monkeypatch, 2 * GiB)
    type_context(qtbot, dialog, 4096)
    cost = dialog.ctx_cost.text()
    assert "Largest that fits with a f16 cache: " in cost and "(trained: 131,072)" in cost and "capped" not in cost
