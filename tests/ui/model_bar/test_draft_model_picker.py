"""The draft-model picker: library models whose vocabulary matches the loaded model's can be chosen; the others
are listed greyed out with the reason; nothing is chosen until a usable model is selected."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt

from app.core.config import paths
from app.ui.model_bar.draft_model_picker import DraftPickerDialog, check_options
from synth_gguf import write_synthetic_gguf


def _library(tmp: Path) -> dict[str, Path]:
    models = paths.models_dir()
    models.mkdir(parents=True, exist_ok=True)
    main = write_synthetic_gguf(tmp / "main.gguf", n_vocab=300, n_layers=4)
    return {
        "main": main,
        "small": write_synthetic_gguf(models / "small-draft.gguf", n_vocab=300, n_layers=1, n_embd=64, n_ff=128,
                                      n_head=2, n_head_kv=1),
        "big": write_synthetic_gguf(models / "big-same-vocab.gguf", n_vocab=300, n_layers=8),
        "other": write_synthetic_gguf(models / "other-vocab.gguf", n_vocab=260),
    }


def test_only_matching_vocabularies_can_be_picked_and_the_others_say_why(qtbot, tmp_path: Path) -> None:
    files = _library(tmp_path)
    dlg = DraftPickerDialog(files["main"], draft_max=6)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.ready, timeout=10_000)
    rows = {Path(dlg.list.item(i).data(DraftPickerDialog.ROLE)).name: dlg.list.item(i) for i in range(dlg.list.count())}
    assert set(rows) == {"small-draft.gguf", "big-same-vocab.gguf", "other-vocab.gguf"}
    order = [Path(dlg.list.item(i).data(DraftPickerDialog.ROLE)).name for i in range(dlg.list.count())]
    assert order == ["small-draft.gguf", "big-same-vocab.gguf", "other-vocab.gguf"]  # usable, smallest first
    other = rows["other-vocab.gguf"]
    assert not other.flags() & Qt.ItemFlag.ItemIsEnabled
    assert "different vocabulary sizes (300 vs the draft's 260 tokens)" in other.text()
    assert "not smaller than the loaded model" in rows["big-same-vocab.gguf"].text()
    assert rows["small-draft.gguf"].flags() & Qt.ItemFlag.ItemIsEnabled
    assert "2 of 3 library models can draft" in dlg.status.text()
    # nothing chosen yet; a refused model cannot be chosen; a matching one can
    assert dlg.selected_path() is None and not dlg.ok.isEnabled()
    dlg.list.setCurrentItem(other)
    assert dlg.selected_path() is None and not dlg.ok.isEnabled()
    dlg.list.setCurrentItem(rows["small-draft.gguf"])
    assert dlg.selected_path() == str(files["small"]) and dlg.ok.isEnabled()
    assert dlg.draft_max() == 6


def test_the_loaded_model_and_unreadable_files_are_refused_with_the_reason(tmp_path: Path) -> None:
    main = write_synthetic_gguf(tmp_path / "main.gguf", n_vocab=300)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    options = {Path(o.path).name: o for o in check_options(str(main), [str(main), str(bad)])}
    assert options["main.gguf"].problem == "it is the loaded model itself"
    assert "its tokenizer cannot be read: the file ends inside its header" in (options["bad.gguf"].problem or "")
    assert not any(o.usable for o in options.values())


def test_an_empty_library_says_what_to_do(qtbot, tmp_path: Path) -> None:
    main = write_synthetic_gguf(tmp_path / "main.gguf", n_vocab=300)
    dlg = DraftPickerDialog(main, candidates=lambda: [])
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.ready, timeout=10_000)
    assert dlg.list.count() == 0 and "no other models" in dlg.status.text() and not dlg.ok.isEnabled()
    assert os.path.exists(main)
