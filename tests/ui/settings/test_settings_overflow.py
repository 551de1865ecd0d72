"""Settings ▸ "When the context is full" (issue 32, item 12): the overflow policy is a setting of its own in the
Settings dialog, not only a preset's field; OK saves it and the next reply asks the engine for it, and a model
whose preset chooses its own policy says so under the field (the preset wins for that model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.config.defaults import CONTEXT_OVERFLOW_LABELS, CONTEXT_OVERFLOW_POLICIES
from app.core.config.settings import ModelPreset
from app.core.models.presets import set_preset
from app.engine import protocol as P
from chat_drive import send

pytestmark = pytest.mark.gui


def settings_ok_with(window: Any, monkeypatch: pytest.MonkeyPatch, policy: str) -> Any:
    """File ▸ Settings…, the policy chosen in its combo and OK pressed; the dialog."""
    from app.ui.settings.dialog import SettingsDialog

    opened: list[SettingsDialog] = []

    def choose_and_ok(dialog: SettingsDialog) -> int:
        opened.append(dialog)
        dialog.overflow.setCurrentIndex(dialog.overflow.findData(policy))
        dialog._accept()
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", choose_and_ok)
    window.menus.settings.trigger()
    assert len(opened) == 1
    return opened[0]


def last_generate(window: Any) -> Any:
    sent = [c for c in window.engine.client.sent if isinstance(c, P.Generate)]
    assert sent, "no reply was asked of the engine"
    return sent[-1]


def test_every_policy_has_a_label_in_the_dialog(win: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    dialog = settings_ok_with(win, monkeypatch, "stop")
    offered = [dialog.overflow.itemData(i) for i in range(dialog.overflow.count())]
    assert offered == list(CONTEXT_OVERFLOW_POLICIES)
    assert [dialog.overflow.itemText(i) for i in range(dialog.overflow.count())] == \
        [CONTEXT_OVERFLOW_LABELS[p] for p in CONTEXT_OVERFLOW_POLICIES]


@pytest.mark.parametrize("policy", ["rolling", "truncate-middle"])
def test_the_setting_is_saved_and_the_next_reply_uses_it(win: Any, monkeypatch: pytest.MonkeyPatch,
                                                        policy: str) -> None:
    settings_ok_with(win, monkeypatch, policy)
    assert win.settings.context_overflow == policy
    send(win, "hello")
    assert last_generate(win).context_overflow == policy


def test_the_dialog_opens_on_the_saved_policy(win: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings_ok_with(win, monkeypatch, "rolling")
    from app.ui.settings.dialog import SettingsDialog

    dialog = SettingsDialog(win.settings, win)
    assert dialog.overflow.currentData() == "rolling"
    assert dialog.result_settings().context_overflow == "rolling"


def test_a_preset_policy_is_said_to_win(win: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from app.ui.settings.dialog import SettingsDialog

    model = tmp_path / "chatty-Q4_K_M.gguf"
    win.session.model_path = str(model)
    set_preset(win.settings, model, ModelPreset(context_overflow="rolling"))
    dialog = SettingsDialog(win.settings, win, model_path=str(model))
    note = dialog.preset_notes[dialog.overflow]
    assert CONTEXT_OVERFLOW_LABELS["rolling"] in note.text() and model.name in note.text()


def test_a_saved_policy_applies_from_the_start(qtbot: Any, tmp_path: Path) -> None:
    from app.core.chat.store import ChatStore
    from app.core.config.settings import Settings
    from fake_engine import loaded_event
    from fake_window import make_window

    store = ChatStore(tmp_path / "chats.sqlite3")
    window = make_window(qtbot, store=store, settings=Settings(context_overflow="truncate-middle"))
    window.show()
    window.engine._dispatch(loaded_event())
    try:
        send(window, "hello")
        assert last_generate(window).context_overflow == "truncate-middle"
    finally:
        window.close()
        store.close()


def test_the_preset_dialog_names_the_policies_and_the_settings_one(win: Any, tmp_path: Path) -> None:
    from app.ui.model_bar.preset_dialog import PresetDialog

    win.settings.context_overflow = "rolling"
    dialog = PresetDialog(win.settings, tmp_path / "m-Q4_K_M.gguf", win.sampling_panel.values(), win)
    texts = [dialog.overflow.itemText(i) for i in range(dialog.overflow.count())]
    assert texts == [f"from settings: {CONTEXT_OVERFLOW_LABELS['rolling']}",
                     *(CONTEXT_OVERFLOW_LABELS[p] for p in CONTEXT_OVERFLOW_POLICIES)]
    assert dialog.overflow.currentData() is None  # not set: the settings' policy applies
