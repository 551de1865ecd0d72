"""Window details new users trip over (issue items): Settings ▸ OK keeps the sidebar, a new chat starts without
the previous chat's system prompt, Tab leaves the System prompt. Runs on the fake engine: no model process."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.chat.store import ChatStore

OFFSCREEN_NOISE = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
pytestmark = [pytest.mark.gui, OFFSCREEN_NOISE]




def test_settings_ok_keeps_the_sidebar_sampling_values(window, monkeypatch) -> None:
    from app.ui.settings.dialog import SettingsDialog

    monkeypatch.setattr(SettingsDialog, "exec", lambda self: 1)  # the user presses OK without changing anything
    window.sampling_panel.max_tokens.setValue(64)
    window.sampling_panel.temperature.setValue(0.3)
    window.open_settings()
    assert window.sampling_panel.max_tokens.value() == 64
    assert window.sampling_panel.temperature.value() == pytest.approx(0.3)


def test_new_chat_does_not_inherit_the_system_prompt(window) -> None:
    window.new_chat()
    window.sampling_panel.system_prompt.setPlainText("Answer like a pirate.")
    first = window.session.conversation
    assert first is not None and first.system_prompt == "Answer like a pirate."
    window.new_chat()
    second = window.session.conversation
    assert second is not None and second.id != first.id
    assert second.system_prompt == ""
    assert window.sampling_panel.system_prompt.toPlainText() == ""
    assert window.store.conversation(first.id).system_prompt == "Answer like a pirate."  # type: ignore[union-attr]


def test_tab_leaves_the_system_prompt_without_editing_it(window, qtbot) -> None:
    window.new_chat()
    prompt = window.sampling_panel.system_prompt
    prompt.setPlainText("Be brief.")
    prompt.setFocus()
    qtbot.waitUntil(prompt.hasFocus)
    qtbot.keyClick(prompt, Qt.Key.Key_Tab)
    assert prompt.toPlainText() == "Be brief."
    assert not prompt.hasFocus()


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


def test_lab_lengths_typo_is_named_next_to_the_field(qtbot, tmp_path: Path) -> None:
    from app.ui.lab.page import LabPage

    page = LabPage(model_path=str(tmp_path / "none.gguf"))
    qtbot.addWidget(page)
    page.show()
    page.prompts.clear()
    qtbot.keyClicks(page.prompts, "abc,64")
    shown = page.field_check.message
    assert shown.isVisible() and shown.text().startswith("Prompt lengths:") and "“abc”" in shown.text()
    page.start_sweep()
    assert not page.running
    assert "invalid literal" not in page.status.text() and "“abc”" in page.status.text()
    page.prompts.setText("64, 128")
    assert not shown.isVisible()


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


def test_deleting_a_chat_asks_nothing_and_undo_brings_it_back(qtbot, monkeypatch) -> None:
    """Delete goes to the trash at once (no dialog to press Enter through); Undo or Ctrl+Z restores it."""
    from PySide6.QtWidgets import QMessageBox

    from app.ui.chat.conversation_list import ConversationPanel

    store = ChatStore()
    store.create_conversation("Keep me")
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    monkeypatch.setattr(QMessageBox, "exec", lambda box: pytest.fail(f"asked: {box.text()}"))
    panel.view.setCurrentIndex(panel.model.index(0))
    panel.delete_current()
    assert store.list_conversations() == []
    assert not panel.undo_bar.isHidden() and panel.undo_label.text() == "“Keep me” deleted"
    with qtbot.waitSignal(panel.restored):
        panel.undo_button.click()
    assert [c.title for c in store.list_conversations()] == ["Keep me"] and panel.undo_bar.isHidden()
    panel.view.setCurrentIndex(panel.model.index(0))
    panel.delete_current()
    panel.show()
    panel.activateWindow()
    panel.view.setFocus()
    qtbot.waitUntil(panel.view.hasFocus)
    qtbot.keyClick(panel.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert [c.title for c in store.list_conversations()] == ["Keep me"]


def test_trash_view_restores_and_empties(qtbot, monkeypatch) -> None:
    from PySide6.QtWidgets import QDialog

    from app.core.chat import trash as chat_trash
    from app.ui.chat.conversation_list import ConversationPanel
    from app.ui.chat.trash_dialog import TrashDialog

    store = ChatStore()
    for title in ("One", "Two"):
        store.create_conversation(title)
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    for _ in range(2):
        panel.view.setCurrentIndex(panel.model.index(0))
        panel.delete_current()
    panel._undo_timer.timeout.emit()  # the Undo offer ran out: the trash still has both
    panel.undo_delete()
    assert store.list_conversations() == []

    def use(dialog: TrashDialog) -> int:
        assert [dialog.list.item(i).text().split(" · ", 1)[1] for i in range(dialog.list.count())] == ["One", "Two"]
        dialog.list.item(1).setSelected(True)
        dialog.restore_button.click()
        assert dialog.list.count() == 1
        dialog.empty_button.click()
        assert dialog.list.count() == 0 and not dialog.empty_label.isHidden()
        return int(QDialog.DialogCode.Rejected.value)

    monkeypatch.setattr(TrashDialog, "exec", use)
    panel.trash_button.click()
    assert [c.title for c in store.list_conversations()] == ["Two"]
    assert chat_trash.trashed(store) == []


def test_ctrl_q_closes_the_window(window, qtbot) -> None:
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5_000)


def test_keyring_message_is_not_nested_in_itself(qtbot, monkeypatch) -> None:
    from PySide6.QtWidgets import QLabel

    from app.core.config import secrets
    from app.ui.engine_link.remote_dialog import RemoteDialog

    monkeypatch.setattr(secrets, "keyring_available", lambda: False)
    dialog = RemoteDialog()
    qtbot.addWidget(dialog)
    texts = [label.text() for label in dialog.findChildren(QLabel) if "keyring" in label.text()]
    assert texts and all(t.count("keyring is available") == 1 and "(No system keyring" not in t for t in texts)


def test_library_count_says_1_model(qtbot, tmp_path: Path) -> None:
    from app.core.models.library import LocalModel
    from app.ui.models_page import ModelsPage

    page = ModelsPage()
    page.shutdown()
    page._show_library(([LocalModel(path=tmp_path / "a.gguf", source="library", size=1)], {}))  # one model listed
    assert page.library_info.text().startswith("1 model,")
    page.close()


def test_search_without_matches_says_so(qtbot) -> None:
    from app.ui.chat.conversation_list import ConversationPanel

    store = ChatStore()
    store.create_conversation("Alpha")
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.keyClicks(panel.search, "zebra")
    assert panel.no_matches.isVisible() and "zebra" in panel.no_matches.text()
    panel.search.clear()
    assert not panel.no_matches.isVisible()


def test_first_start_says_the_bundled_model_is_a_demo_base_model(window, monkeypatch) -> None:
    from app.core.models import default_model

    loaded = window.engine.loaded_info
    monkeypatch.setattr(default_model, "default_model_path", lambda ensure=True: Path(loaded.model_path))
    window.engine.loaded.emit(loaded)
    assert window.banner.isVisible()
    assert "demo base model" in window.banner.label.text() and "Discover" in window.banner.label.text()
    note_style = window.banner.styleSheet()
    window.banner.show_message("The engine stopped.")  # a warning after the note: warning colours again
    assert window.banner.styleSheet() != note_style and not window.banner.info
    window.banner.show_message("a note", info=True)
    assert window.banner.styleSheet() == note_style  # the note is drawn as a note, not as a warning
