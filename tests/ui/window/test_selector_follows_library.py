"""A model that arrives in the library (a finished download, a quantized file) is in the toolbar's model
selector at once, without Settings ▸ OK or a restart, and the model in use stays chosen."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.config import paths
from fake_window import open_models_page
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui






def _listed(win, path: Path) -> bool:  # type: ignore[no-untyped-def]
    return win.model_combo.findData(str(path)) >= 0


def test_a_finished_download_is_in_the_selector(models_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    in_use = models_window.model_combo.currentData()
    page = open_models_page(models_window, qtbot)
    new = write_synthetic_gguf(paths.models_dir() / "fresh-F32.gguf", n_layers=1)  # the download's file
    assert not _listed(models_window, new)
    page._dl_bridge.finished.emit("job-1")  # the download manager's "finished"
    qtbot.waitUntil(lambda: _listed(models_window, new), timeout=20000)
    assert models_window.model_combo.currentData() == in_use


def test_a_quantized_model_is_in_the_selector(models_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    src = write_synthetic_gguf(paths.models_dir() / "tiny-F32.gguf", n_layers=2)
    page = open_models_page(models_window, qtbot)
    qtbot.waitUntil(lambda: any(m.path == src for m in page.library_model.rows), timeout=20000)
    row = next(i for i, m in enumerate(page.library_model.rows) if m.path == src)
    page.library_view.selectRow(row)
    dlg = page.quantize_selected()
    assert dlg is not None
    dlg.type_box.setCurrentText("Q8_0")
    with qtbot.waitSignal(dlg.finished_ok, timeout=60000) as sig:
        dlg.start_btn.click()
    qtbot.waitUntil(lambda: _listed(models_window, Path(sig.args[0])), timeout=20000)
    dlg.close()
