"""The line under the context-size field of Settings and of a model's preset: decode speed as that context
fills, the chats' measured speeds, and the context-from-use advice (app.ui.settings.context_speed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.bench.zoo import zoo_path
from app.core.chat.model_usage import MeasuredPoint, ModelUsage
from app.core.config.settings import SamplingDefaults, Settings

pytestmark = pytest.mark.gui

USAGE = ModelUsage(replies=6, max_tokens=1500, points=[MeasuredPoint(800.0, 18.0)])


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path_factory.mktemp("zoo"))


def test_settings_context_field_shows_the_curve_and_follows_the_value(qtbot: Any, model: Path) -> None:
    from app.ui.settings.dialog import SettingsDialog

    dlg = SettingsDialog(Settings(n_ctx=16384), model_path=str(model), usage=USAGE)
    qtbot.addWidget(dlg)
    text = dlg.ctx_speed.text()
    assert text.startswith("decode at 0: ") and "at 16k: " in text
    assert "your chats measured 18 tok/s at 800 (1 reply)" in text
    assert "your chats with this model reached 1.5k tokens; 2k would free " in text
    dlg.n_ctx.setValue(2048)
    text = dlg.ctx_speed.text()
    assert "at 2k: " in text and "at 16k" not in text and "would free" not in text  # 2k is what it suggests


def test_settings_without_a_model_say_nothing(qtbot: Any) -> None:
    from app.ui.settings.dialog import SettingsDialog

    dlg = SettingsDialog(Settings())
    qtbot.addWidget(dlg)
    assert dlg.ctx_speed.text() == ""


def test_preset_context_field_uses_the_settings_value_until_set(qtbot: Any, model: Path) -> None:
    from app.ui.model_bar.preset_dialog import PresetDialog

    dlg = PresetDialog(Settings(n_ctx=8192), model, SamplingDefaults(), usage=USAGE)
    qtbot.addWidget(dlg)
    assert "at 8k: " in dlg.ctx_speed.text()  # the preset sets no context: the settings' 8k
    dlg.n_ctx.setValue(32768)
    text = dlg.ctx_speed.text()
    assert "at 32k: " in text and "reached 1.5k tokens; 2k would free " in text


def test_a_context_below_what_the_chats_reached_warns_that_it_cuts_them(qtbot: Any, model: Path) -> None:
    from app.ui.settings.dialog import SettingsDialog

    usage = ModelUsage(replies=2, max_tokens=388)  # two replies: too few to size the context from, enough to cut
    dlg = SettingsDialog(Settings(n_ctx=4096), model_path=str(model), usage=usage)
    qtbot.addWidget(dlg)
    dlg.n_ctx.selectAll()
    qtbot.keyClicks(dlg.n_ctx, "256")
    qtbot.keyClick(dlg.n_ctx, Qt.Key.Key_Tab)
    assert dlg.n_ctx.value() == 256
    assert "your chats with this model reached 388 tokens: 256 would cut them" in dlg.ctx_speed.text()
    dlg.n_ctx.setValue(512)
    assert "reached 388" not in dlg.ctx_speed.text()  # 512 holds them, and two replies are too few to advise
