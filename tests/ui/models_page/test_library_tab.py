"""The Library tab's buttons and count line: Quantize disabled with the reason, "1 model" in the singular."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gui


def test_quantize_disabled_says_why(qtbot, monkeypatch, tmp_path: Path) -> None:
    from app.core.models.library import LocalModel
    from app.ui.models_page import ModelsPage

    page = ModelsPage()
    quantized = LocalModel(path=tmp_path / "m-Q8_0.gguf", source="default", quant="Q8_0")
    monkeypatch.setattr(page, "selected_local", lambda: quantized)
    page._update_library_buttons()
    assert not page.quantize_btn.isEnabled()
    assert "Q8_0" in page.quantize_btn.toolTip() and "F32, F16 or BF16" in page.quantize_btn.toolTip()
    full = LocalModel(path=tmp_path / "m-F16.gguf", source="library", quant="F16")
    monkeypatch.setattr(page, "selected_local", lambda: full)
    page._update_library_buttons()
    assert page.quantize_btn.isEnabled() and "F32, F16" not in page.quantize_btn.toolTip()
    page.shutdown()
    page.close()


def test_library_count_says_1_model(qtbot, tmp_path: Path) -> None:
    from app.core.models.library import LocalModel
    from app.ui.models_page import ModelsPage

    page = ModelsPage()
    page.shutdown()
    page._show_library(([LocalModel(path=tmp_path / "a.gguf", source="library", size=1)], {}))  # one model listed
    assert page.library_info.text().startswith("1 model,")
    page.close()
