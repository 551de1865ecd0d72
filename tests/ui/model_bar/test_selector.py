"""The toolbar's model selector: imported and quantized models listed, the same model chosen again after a
failed connect reloads it. Runs on the fake engine: no model process."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gui


def test_selector_lists_imported_and_quantized_models(window, tmp_path: Path) -> None:
    models = tmp_path / "models"
    for rel in ("top.gguf", "imported/mine-Q8_0.gguf", "quantized/small-Q4_K_M.gguf"):
        (models / rel).parent.mkdir(parents=True, exist_ok=True)
        (models / rel).write_bytes(b"GGUF")
    window.settings.models_dir = str(models)
    window._populate_models()
    data = [window.model_combo.itemData(i) for i in range(window.model_combo.count())]
    labels = [window.model_combo.itemText(i) for i in range(window.model_combo.count())]
    for rel in ("top.gguf", "imported/mine-Q8_0.gguf", "quantized/small-Q4_K_M.gguf"):
        assert str(models / rel) in data
        assert rel in labels


def test_rechoosing_the_model_after_a_failed_connect_reloads_it(window, monkeypatch) -> None:
    from app.ui.model_bar.selector import needs_load

    loads: list[str] = []
    monkeypatch.setattr(window, "load_model", lambda path: loads.append(str(path)))
    current = window.engine.loaded_info.model_path
    window.session.model_path = current
    window._select_model_in_combo(current)
    window._model_chosen(window.model_combo.currentIndex())
    assert loads == []  # the loaded model chosen again: nothing to do
    window.engine.loaded_info = None  # what a failed "Connect to a server…" leaves behind
    window._model_chosen(window.model_combo.currentIndex())
    assert loads == [current]
    assert needs_load("/m/b.gguf", "/m/a.gguf", "/m/a.gguf")
