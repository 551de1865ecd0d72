"""Small text defects the QA pass found (item E6): the draft picker's count ("None of the library's 1 models
shares…", of a library holding only the loaded model), the Preset dialog's internal key
("this file (x.gguf:253113024)"), the status bar's "engine: loading — loading 100 %", the Trash dialog opening
with nothing selected (Restore disabled), and a Model menu without mnemonics."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QToolBar

from app.core.config.settings import SamplingDefaults, Settings
from app.core.models.presets import preset_key
from app.engine import protocol as P
from app.ui.chat.trash_dialog import TrashDialog
from app.ui.model_bar.draft_model_picker import DraftPickerDialog
from app.ui.model_bar.preset_dialog import PresetDialog
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui


def picker_status(qtbot, main: Path, library: list[Path]) -> str:
    dialog = DraftPickerDialog(main, candidates=lambda: [str(p) for p in library])
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.ready, timeout=10_000)
    return dialog.status.text()


def test_the_draft_picker_counts_the_other_models_in_good_english(qtbot, tmp_path: Path) -> None:
    main = write_synthetic_gguf(tmp_path / "main.gguf", n_vocab=300)
    other = write_synthetic_gguf(tmp_path / "other-vocab.gguf", n_vocab=260)
    same = write_synthetic_gguf(tmp_path / "same-vocab.gguf", n_vocab=300, n_layers=1)
    assert picker_status(qtbot, main, [main]).startswith("The library has no other models.")  # itself alone
    assert picker_status(qtbot, main, [main, other]).startswith(
        "The library's one other model does not share this model's vocabulary")
    assert picker_status(qtbot, main, [main, same]) == "The library's one other model can draft for this model."
    two = picker_status(qtbot, main, [main, other, write_synthetic_gguf(tmp_path / "o2.gguf", n_vocab=270)])
    assert two.startswith("None of the library's 2 other models shares this model's vocabulary")


def test_the_preset_dialog_names_the_file_not_its_key(qtbot, tmp_path: Path) -> None:
    model = tmp_path / "gemma-3-270m-q4_k_m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 100)
    dialog = PresetDialog(Settings(), model, SamplingDefaults())
    qtbot.addWidget(dialog)
    assert dialog.note.text().startswith("Applied whenever this file (gemma-3-270m-q4_k_m.gguf) is chosen")
    assert preset_key(model) not in dialog.note.text() and preset_key(model) in dialog.note.toolTip()


def test_the_status_bar_says_loading_once(window) -> None:
    window.engine._dispatch(P.Progress("loading", 1.0))
    assert window.state_label.text() == "engine: loading 100 %"
    window.engine._dispatch(P.Progress("warming up", 0.5))  # a stage of its own still shows
    assert window.state_label.text() == "engine: loading — warming up 50 %"


def test_the_trash_opens_with_its_first_chat_selected(qtbot, window) -> None:
    for title in ("First", "Second"):
        window.store.delete_conversation(window.store.create_conversation(title).id)
    dialog = TrashDialog(window.store, window)
    qtbot.addWidget(dialog)
    assert [item.text().rsplit(" · ", 1)[1] for item in dialog.list.selectedItems()] == ["Second"]  # the newest
    assert dialog.list.currentRow() == 0 and dialog.restore_button.isEnabled()
    restored: list[int] = []
    dialog.restored.connect(restored.append)
    dialog.restore_button.click()
    assert len(restored) == 1 and dialog.list.selectedItems()  # the next one is chosen in its turn


def test_the_model_menu_has_mnemonics_and_the_toolbar_shows_none(window) -> None:
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Model")
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert texts == ["&Reload", "E&ject", "&Preset…", "&Draft model…", "&Serve"]
    keys = [t[t.index("&") + 1].lower() for t in texts]
    assert len(set(keys)) == len(keys)  # each letter once in the menu
    toolbar = window.findChild(QToolBar, "model_toolbar")
    shown = {toolbar.widgetForAction(a).text() for a in menu.actions() if toolbar.widgetForAction(a) is not None}
    assert shown == {"Reload", "Eject", "Preset", "Draft model", "Serve"}  # as before: Qt drops the "…" there too
