"""Settings ▸ Context size next to a preset (issue 32, item 6): the dialog, opened from the window's menu
for a model whose preset sets its own context, says under the field that the preset's value is the one
used; and OK is disabled for a context the dialog itself says does not fit this machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from app.core.bench.zoo import zoo_path
from app.core.config.settings import ModelPreset
from app.core.models.presets import set_preset
from app.core.predict.hardware import GiB
from app.core.predict.recommend import Budget

pytestmark = pytest.mark.gui


def open_settings_from_menu(window, monkeypatch) -> object:
    """File ▸ Settings…, the dialog captured instead of run modally (then cancelled)."""
    from app.ui.settings.dialog import SettingsDialog

    small = Budget(ram=2 * GiB, vram=0, unified=False, gpu=None)  # a 2 GiB machine, whatever runs the test
    monkeypatch.setattr("app.core.predict.recommend.memory_budget", lambda hw, vram_limit=None: small)
    opened: list[SettingsDialog] = []
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: opened.append(self) or 0)
    window.menus.settings.trigger()
    assert len(opened) == 1
    return opened[0]


def ok_of(dialog) -> object:
    return dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)


def test_a_preset_context_is_said_to_win(window, monkeypatch, tmp_path: Path) -> None:
    model = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    window.session.model_path = str(model)
    set_preset(window.settings, model, ModelPreset(n_ctx=4096))
    dialog = open_settings_from_menu(window, monkeypatch)
    note = dialog.preset_notes[dialog.n_ctx]
    assert not note.isHidden() and "preset sets 4096" in note.text() and model.name in note.text()
    assert dialog.gpu_layers not in dialog.preset_notes  # the preset sets no GPU layers: nothing said there
    dialog.n_ctx.setValue(1 << 20)  # too big here, but the preset's 4096 is what this model loads with
    assert ok_of(dialog).isEnabled()


def test_a_context_that_does_not_fit_disables_ok(window, monkeypatch, tmp_path: Path) -> None:
    model = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    window.session.model_path = str(model)
    dialog = open_settings_from_menu(window, monkeypatch)
    assert dialog.preset_notes == {}
    dialog.n_ctx.setValue(4096)
    assert ok_of(dialog).isEnabled() and ": fits this machine" in dialog.ctx_cost.text()
    dialog.n_ctx.setValue(131072)  # 128k of f16 KV for a 16-layer model: far over 2 GiB
    assert "does NOT fit" in dialog.ctx_cost.text()
    reason = dialog.checks.labels[dialog.n_ctx]
    assert not reason.isHidden() and "do not fit" in reason.text() and "at most" in reason.text()
    assert not ok_of(dialog).isEnabled()
    dialog.n_ctx.setValue(4096)
    assert ok_of(dialog).isEnabled() and reason.isHidden()
