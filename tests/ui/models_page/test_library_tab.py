"""The Library tab's buttons and count line: Quantize disabled with the reason, "1 model" in the singular."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

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


def test_the_library_fits_the_page_at_1600x1000(models_window, qtbot, tmp_path: Path) -> None:
    """No sideways scrolling in a 1600×1000 window with the dashboard shown: the columns fit the page, the name
    taking the spare room and the long location elided (its whole path is in the row's tooltip)."""
    from PySide6.QtWidgets import QApplication

    from app.core.config import paths
    from fake_window import open_models_page
    from synth_gguf import write_synthetic_gguf

    deep = paths.models_dir() / "imported" / "bartowski" / "Meta-Llama-3.1-8B-Instruct-GGUF"
    deep.mkdir(parents=True)
    for name in ("Meta-Llama-3.1-8B-Instruct-abliterated-Q4_K_M.gguf", "gemma-3-270m-it-qat-Q4_0.gguf"):
        write_synthetic_gguf(deep / name, n_layers=1)
    (paths.models_dir() / "a-broken-download-of-a-model-with-a-long-name.gguf").write_bytes(b"GGUF\x03\0\0\0junk")
    models_window.resize(1600, 1000)
    page = open_models_page(models_window, qtbot, listed=True)
    qtbot.waitUntil(lambda: page.library_model.rowCount() >= 3, timeout=20000)
    for _ in range(5):
        QApplication.processEvents()
    view = page.library_view
    assert models_window.dock.isVisible() and view.isVisible()
    header = view.horizontalHeader()
    assert sum(header.sectionSize(c) for c in range(header.count())) <= view.viewport().width()
    assert view.horizontalScrollBar().maximum() == 0 and not view.horizontalScrollBar().isVisible()
    location = page.library_model.HEADERS.index("Location / problem")
    row = next(r for r, m in enumerate(page.library_model.rows) if m.path.parent == deep)
    assert str(deep) in page.library_model.index(row, location).data(Qt.ItemDataRole.ToolTipRole)


def test_long_titles_break_into_two_lines_keeping_a_slash_pair_together() -> None:
    from app.ui.models_page.tables import two_lines

    assert two_lines("Max context f16 / q8_0 / q4_0") == "Max context\nf16 / q8_0 / q4_0"
    assert two_lines("Prefill / decode tok/s") == "Prefill / decode\ntok/s"
    assert two_lines("Location / problem") == "Location /\nproblem"
    assert two_lines("Last used") == "Last used" and two_lines("Chat template") == "Chat\ntemplate"
