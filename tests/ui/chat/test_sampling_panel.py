"""The sidebar's sampling values and system prompt in the window: kept through Settings ▸ OK, not inherited
by a new chat, left with Tab unchanged. Runs on the fake engine: no model process."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytestmark = pytest.mark.gui


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
