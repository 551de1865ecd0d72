"""The window applies the chosen model's preset (load options, sampling panel, overflow policy, system prompt of
a new chat) through the same plan as `roofline chat`, keeps the preset's values out of the global defaults it
saves, and edits the preset in its dialog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.chat.store import ChatStore
from app.core.config import settings as S
from app.core.models.presets import preset_for, preset_key, set_preset
from app.engine import protocol as P
from app.ui.window.main_window import MainWindow
from fake_engine import loaded_event
from fake_window import make_window


def _model(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(b"GGUF" + b"\0" * 100)  # never opened: the fake engine only records the Load command
    return path


def _window(qtbot, tmp_path: Path, settings: S.Settings) -> MainWindow:  # type: ignore[no-untyped-def]
    return make_window(qtbot, store=ChatStore(tmp_path / "chats.sqlite3"), settings=settings)


def _last(win: MainWindow, kind: type) -> object:
    return [c for c in win.engine.client.sent if isinstance(c, kind)][-1]  # type: ignore[attr-defined]


def test_choosing_a_model_applies_its_preset_and_another_model_goes_back(qtbot, tmp_path: Path) -> None:
    with_preset, plain = _model(tmp_path, "a-Q4_K_M.gguf"), _model(tmp_path, "b-Q8_0.gguf")
    settings = S.Settings(n_ctx=8192, sampling=S.SamplingDefaults(temperature=0.3, top_k=7))
    set_preset(settings, with_preset, S.ModelPreset(
        n_ctx=2048, kv_cache_type="q8_0", flash_attn=True, context_overflow="rolling", system_prompt="Be brief.",
        sampling=S.PresetSampling(temperature=0.1)))
    win = _window(qtbot, tmp_path, settings)

    win.load_model(with_preset)
    cfg = _last(win, P.Load).config  # type: ignore[attr-defined]
    assert (cfg.n_ctx, cfg.type_k, cfg.flash_attn) == (2048, "q8_0", True)
    assert win.sampling_panel.temperature.value() == pytest.approx(0.1)
    assert win.sampling_panel.top_k.value() == 7  # the preset does not set it: the settings' value
    win.engine._dispatch(loaded_event())
    win.new_chat()
    assert win.sampling_panel.system_prompt.toPlainText() == "Be brief."
    win.input.setPlainText("hello")
    win.submit()
    gen = _last(win, P.Generate)
    assert gen.context_overflow == "rolling" and gen.sampling.temperature == pytest.approx(0.1)  # type: ignore[attr-defined]
    assert gen.messages[0] == {"role": "system", "content": "Be brief."}  # type: ignore[attr-defined]
    win.session.stop()

    win.load_model(plain)
    cfg = _last(win, P.Load).config  # type: ignore[attr-defined]
    assert (cfg.n_ctx, cfg.type_k) == (8192, "f16")
    assert win.sampling_panel.temperature.value() == pytest.approx(0.3)
    assert win.session.context_overflow == "stop"
    win.save_settings()
    saved = json.loads(S.settings_path().read_text(encoding="utf-8"))
    assert saved["sampling"]["temperature"] == pytest.approx(0.3)  # the preset's 0.1 did not become the default
    assert saved["presets"][preset_key(with_preset)]["n_ctx"] == 2048


def test_the_preset_dialog_saves_the_preset_and_reloads(qtbot, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui.model_bar.preset_dialog import PresetDialog

    model = _model(tmp_path, "c-Q4_K_M.gguf")
    win = _window(qtbot, tmp_path, S.Settings(sampling=S.SamplingDefaults(temperature=0.7)))
    win.load_model(model)
    win.sampling_panel.temperature.setValue(0.2)
    loads = len([c for c in win.engine.client.sent if isinstance(c, P.Load)])  # type: ignore[attr-defined]

    def edit(dialog: PresetDialog) -> int:
        dialog.n_ctx.setValue(1024)
        dialog.overflow.setCurrentIndex(dialog.overflow.findData("truncate-middle"))
        dialog.keep_sampling.setChecked(True)
        return 1

    monkeypatch.setattr(PresetDialog, "exec", edit)
    win.model_preset.open_dialog()
    preset = preset_for(win.settings, model)
    assert preset is not None and preset.n_ctx == 1024 and preset.sampling.temperature == pytest.approx(0.2)
    assert preset.context_overflow == "truncate-middle" and preset.kv_cache_type is None  # left "from settings"
    sent = [c for c in win.engine.client.sent if isinstance(c, P.Load)]  # type: ignore[attr-defined]
    assert len(sent) == loads + 1 and sent[-1].config.n_ctx == 1024  # the context changed: reloaded
    assert win.session.context_overflow == "truncate-middle"
    saved = S.load_settings()
    assert saved.warning is None and preset_for(saved.settings, model).n_ctx == 1024  # type: ignore[union-attr]
    assert saved.settings.sampling.temperature == pytest.approx(0.7)  # the preset's 0.2 is not the new default

    def remove(dialog: PresetDialog) -> int:
        dialog._remove()
        return 1

    monkeypatch.setattr(PresetDialog, "exec", remove)
    win.model_preset.open_dialog()
    assert preset_for(win.settings, model) is None
    assert [c for c in win.engine.client.sent if isinstance(c, P.Load)][-1].config.n_ctx == 4096  # type: ignore[attr-defined]
    assert win.sampling_panel.temperature.value() == pytest.approx(0.7)


def test_moe_experts_in_ram_from_the_preset_reach_the_load(qtbot, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui.model_bar.preset_dialog import PresetDialog

    model = _model(tmp_path, "moe-Q4_K_M.gguf")
    win = _window(qtbot, tmp_path, S.Settings())
    win.load_model(model)
    assert _last(win, P.Load).config.n_cpu_moe == 0  # type: ignore[attr-defined]

    def edit(dialog: PresetDialog) -> int:
        assert dialog.cpu_moe.value() == dialog.cpu_moe.minimum()  # not set: from settings
        dialog.cpu_moe.setValue(12)
        return 1

    monkeypatch.setattr(PresetDialog, "exec", edit)
    win.model_preset.open_dialog()
    preset = preset_for(win.settings, model)
    assert preset is not None and preset.n_cpu_moe == 12
    assert _last(win, P.Load).config.n_cpu_moe == 12  # type: ignore[attr-defined]


def test_remove_preset_is_disabled_until_the_model_has_one(qtbot, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui.model_bar.preset_dialog import PresetDialog

    model = _model(tmp_path, "d-Q4_K_M.gguf")
    win = _window(qtbot, tmp_path, S.Settings())
    win.load_model(model)
    seen: list[bool] = []

    def save_a_context(dialog: PresetDialog) -> int:
        seen.append(dialog.remove_button.isEnabled())
        dialog.n_ctx.setValue(2048)
        return 1  # Save

    monkeypatch.setattr(PresetDialog, "exec", save_a_context)
    win.preset_action.trigger()  # the toolbar's Preset…: no preset yet, nothing to remove
    assert seen == [False] and preset_for(win.settings, model) is not None
    win.preset_action.trigger()  # once saved, it can be removed
    assert seen == [False, True]
