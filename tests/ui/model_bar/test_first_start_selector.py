"""First start (issue 32, item 17): the default model is assembled after the window opened, and the
toolbar's selector then shows its summary (size · quantization · verdict) and the advice tooltip, as it does
on every later start."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.bench.zoo import zoo_path
from fake_window import make_window

pytestmark = pytest.mark.gui


def test_the_default_model_assembled_at_first_start_gets_its_summary(qtbot, tmp_path: Path, monkeypatch) -> None:
    from app.ui.window import model_loading

    target = zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path)
    target.unlink()  # not there yet: the first start assembles it
    monkeypatch.setenv("ROOFLINE_DEFAULT_MODEL", str(target))
    monkeypatch.setattr(model_loading, "_prepare_default_model", lambda: zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path))
    win = make_window(qtbot)
    win.show()
    win.load_default_model()  # what the window does at start with no last model

    def summarised() -> bool:
        i = win.model_combo.findData(str(target))
        return i >= 0 and "Q4_K_M" in win.model_combo.itemText(i) and " — " in win.model_combo.itemText(i)

    qtbot.waitUntil(summarised, timeout=30000)
    i = win.model_combo.findData(str(target))
    assert "Recommend" in str(win.model_combo.itemData(i, Qt.ItemDataRole.ToolTipRole))
    assert win.model_combo.currentData() == str(target)
    win.close()
