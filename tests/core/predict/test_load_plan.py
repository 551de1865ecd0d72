"""One way from settings to a load (app.core.predict.load_plan): settings.json, then the model's preset, then the
auto-tune result, then command-line flags, each winning over the one before; presets that do not validate are
dropped alone, with a note, and kept in the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.config import settings as S
from app.core.models.presets import preset_for, preset_key, set_preset
from app.core.predict.load_plan import plan_load

TUNED = {"n_threads": 3, "n_threads_batch": 5, "n_ubatch": 128, "n_batch": 128}


def _model(tmp_path: Path, name: str = "m-Q4_K_M.gguf", size: int = 1000) -> Path:
    path = tmp_path / name
    path.write_bytes(b"\0" * size)
    return path


def _settings(tmp_path: Path, data: dict[str, Any]) -> S.LoadResult:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return S.load_settings(path)


def _no_tune(_: Any) -> None:
    return None


def test_built_in_defaults_then_settings(tmp_path: Path) -> None:
    model = _model(tmp_path)
    plan = plan_load(model, S.Settings(), tuned=_no_tune)
    assert plan.values["n_ctx"] == 4096 and plan.sources["n_ctx"] == "default"
    assert plan.values["n_gpu_layers"] == -1  # auto
    settings = _settings(tmp_path, {"n_ctx": 8192, "kv_cache_type": "q8_0", "sampling": {"temperature": 0.3}}).settings
    plan = plan_load(model, settings, tuned=_no_tune)
    assert (plan.values["n_ctx"], plan.sources["n_ctx"]) == (8192, "settings")
    assert (plan.values["type_k"], plan.values["type_v"], plan.sources["type_v"]) == ("q8_0", "q8_0", "settings")
    assert (plan.values["temperature"], plan.sources["temperature"]) == (0.3, "settings")
    assert plan.sources["top_p"] == "default"  # the file's sampling block did not set it
    assert plan.preset is None


def test_each_layer_wins_over_the_one_before(tmp_path: Path) -> None:
    model = _model(tmp_path)
    settings = _settings(tmp_path, {"n_ctx": 8192, "n_ubatch": 256,
                                    "sampling": {"temperature": 0.3, "top_k": 7}}).settings
    set_preset(settings, model, S.ModelPreset(n_ctx=2048, sampling=S.PresetSampling(temperature=0.1),
                                              system_prompt="Be brief.", context_overflow="rolling"))
    plan = plan_load(model, settings, tuned=lambda _: dict(TUNED))
    assert (plan.values["n_ctx"], plan.sources["n_ctx"]) == (2048, "preset")  # preset over settings
    assert (plan.values["temperature"], plan.sources["temperature"]) == (0.1, "preset")
    assert (plan.values["top_k"], plan.sources["top_k"]) == (7, "settings")  # the preset did not set it
    assert (plan.values["n_ubatch"], plan.sources["n_ubatch"]) == (128, "tune")  # tune over settings
    assert (plan.values["n_threads"], plan.values["n_threads_batch"]) == (3, 5)
    assert plan.values["system_prompt"] == "Be brief." and plan.values["context_overflow"] == "rolling"
    assert plan.preset == preset_key(model)
    flags = {"n_ctx": 1024, "n_ubatch": 64, "temperature": 0.0, "top_k": None, "context_overflow": "stop"}
    plan = plan_load(model, settings, flags, tuned=lambda _: dict(TUNED))
    assert (plan.values["n_ctx"], plan.sources["n_ctx"]) == (1024, "flag")  # flags over everything
    assert (plan.values["n_ubatch"], plan.sources["n_ubatch"]) == (64, "flag")
    assert (plan.values["temperature"], plan.sources["temperature"]) == (0.0, "flag")
    assert plan.sources["top_k"] == "settings"  # a flag not given (None) changes nothing
    assert plan.values["context_overflow"] == "stop"
    assert "ctx 1024 (flag)" in plan.summary_lines()[0]


def test_the_tune_result_is_skipped_with_a_note_when_threads_are_chosen(tmp_path: Path) -> None:
    model = _model(tmp_path)
    settings = S.Settings()
    set_preset(settings, model, S.ModelPreset(threads=2))
    plan = plan_load(model, settings, tuned=lambda _: dict(TUNED))
    assert (plan.values["n_threads"], plan.sources["n_threads"]) == (2, "preset")
    assert plan.values["n_ubatch"] == 512 and plan.sources["n_ubatch"] == "default"
    assert any("threads set in the preset" in note for note in plan.notes)

    def unreadable(_: Any) -> None:
        raise OSError("permission denied")

    plan = plan_load(model, S.Settings(), tuned=unreadable)
    assert plan.values["n_threads"] is None and plan.sources["n_ubatch"] == "default"
    assert any("could not be read" in note and "permission denied" in note for note in plan.notes)


def test_a_preset_belongs_to_one_file_name_and_size(tmp_path: Path) -> None:
    model = _model(tmp_path)
    settings = S.Settings()
    set_preset(settings, model, S.ModelPreset(n_ctx=2048))
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    same = _model(moved)  # the same file in another folder: the same preset
    assert preset_for(settings, same) is not None
    regrown = _model(moved, size=2000)  # same name, another file (a re-download): not this preset
    assert preset_for(settings, regrown) is None
    assert plan_load(regrown, settings, tuned=_no_tune).sources["n_ctx"] == "default"
    # no model (a remote server): no preset, no tune, the settings as usual
    plan = plan_load(None, settings, tuned=lambda _: dict(TUNED))
    assert plan.values["n_threads"] is None and plan.preset is None


def test_a_broken_preset_is_dropped_alone_and_kept_in_the_file(tmp_path: Path) -> None:
    good, bad = _model(tmp_path, "good.gguf"), _model(tmp_path, "bad.gguf")
    result = _settings(tmp_path, {"n_ctx": 8192, "presets": {
        preset_key(good): {"n_ctx": 2048}, preset_key(bad): {"n_ctx": "lots", "kv_cache_type": "q2"}}})
    assert result.backup is None  # the file is not moved aside for one bad preset
    assert result.settings.n_ctx == 8192
    assert result.warning and "invalid model preset" in result.warning and preset_key(bad) in result.warning
    assert preset_for(result.settings, good) is not None and preset_for(result.settings, bad) is None
    assert plan_load(bad, result.settings, tuned=_no_tune).sources["n_ctx"] == "settings"
    # saving (the window does on close) writes the broken entry back unchanged
    path = tmp_path / "settings.json"
    S.save_settings(result.settings, path)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["presets"][preset_key(bad)] == {"n_ctx": "lots", "kv_cache_type": "q2"}
    assert saved["presets"][preset_key(good)]["n_ctx"] == 2048
    # a new preset saved for that model replaces the broken entry
    set_preset(result.settings, bad, S.ModelPreset(n_ctx=1024))
    S.save_settings(result.settings, path)
    again = S.load_settings(path)
    assert again.warning is None
    assert preset_for(again.settings, bad).n_ctx == 1024  # type: ignore[union-attr]


@pytest.mark.parametrize("presets", [[1, 2], "x"])
def test_presets_that_are_not_an_object_move_the_file_aside_as_any_invalid_file(tmp_path: Path,
                                                                               presets: Any) -> None:
    result = _settings(tmp_path, {"n_ctx": 8192, "presets": presets})
    assert result.backup is not None and result.backup.exists()
    assert result.settings.n_ctx == 4096 and result.warning


def test_experts_kept_in_ram_come_from_settings_preset_or_flag(tmp_path: Path) -> None:
    model = _model(tmp_path)
    assert plan_load(model, S.Settings(), tuned=_no_tune).values["n_cpu_moe"] == 0
    settings = _settings(tmp_path, {"n_cpu_moe": 4}).settings
    plan = plan_load(model, settings, tuned=_no_tune)
    assert (plan.values["n_cpu_moe"], plan.sources["n_cpu_moe"]) == (4, "settings")
    assert plan.load_kwargs()["n_cpu_moe"] == 4 and "experts in RAM for blocks < 4" in plan.summary_lines()[0]
    set_preset(settings, model, S.ModelPreset(n_cpu_moe=9))
    assert plan_load(model, settings, tuned=_no_tune).values["n_cpu_moe"] == 9
    plan = plan_load(model, settings, {"n_cpu_moe": 2}, tuned=_no_tune)
    assert (plan.values["n_cpu_moe"], plan.sources["n_cpu_moe"]) == (2, "flag")
    with pytest.raises(ValueError):
        S.ModelPreset(n_cpu_moe=-1)


def test_a_gpu_is_expected_when_a_driver_reports_one_or_the_layers_were_set(tmp_path: Path) -> None:
    """Auto layers count on a GPU only where a driver reports one (a CPU-only user of a GPU build gets no warning
    that nothing was offloaded); layers set in the settings, a preset or a flag always do; 0 never does."""
    model = _model(tmp_path)
    auto = plan_load(model, S.Settings(), tuned=_no_tune)
    assert not auto.gpu_layers_asked
    written = plan_load(model, S.Settings(n_gpu_layers=None), tuned=_no_tune)  # the dialog writes auto as null
    assert not written.gpu_layers_asked and written.sources["n_gpu_layers"] == "default"
    assert not auto.gpu_expected(lambda: False) and auto.gpu_expected(lambda: True)
    for plan in (plan_load(model, S.Settings(n_gpu_layers=12), tuned=_no_tune),
                 plan_load(model, S.Settings(), {"n_gpu_layers": -1}, tuned=_no_tune)):
        assert plan.gpu_layers_asked and plan.gpu_expected(lambda: False)
    none = plan_load(model, S.Settings(), {"n_gpu_layers": 0}, tuned=_no_tune)
    assert not none.gpu_expected(lambda: True)
    assert "gpu_expected" in auto.load_kwargs()
