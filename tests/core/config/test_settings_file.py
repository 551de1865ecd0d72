"""Settings: round-trip, env overrides that are never saved, broken/future files fall back with a backup."""

from __future__ import annotations

import json

from app.core.config import settings as S


def test_round_trip(roofline_home):
    s = S.load_settings().settings
    assert s.n_ctx == 4096 and s.n_gpu_layers is None
    s.n_ctx = 8192
    s.kv_cache_type = "q8_0"
    s.sampling.temperature = 0.25
    s.window.geometry = "abc"
    path = S.save_settings(s)
    assert path.parent == roofline_home / "config"
    again = S.load_settings()
    assert again.warning is None
    assert (again.settings.n_ctx, again.settings.kv_cache_type) == (8192, "q8_0")
    assert again.settings.sampling.temperature == 0.25 and again.settings.window.geometry == "abc"


def test_env_overrides_but_is_not_saved(monkeypatch):
    s = S.load_settings().settings
    s.n_ctx = 2048
    S.save_settings(s)
    monkeypatch.setenv("ROOFLINE_N_CTX", "16384")
    monkeypatch.setenv("ROOFLINE_SAMPLING__TOP_K", "7")
    loaded = S.load_settings().settings
    assert loaded.n_ctx == 16384 and loaded.sampling.top_k == 7
    loaded.threads = 3
    S.save_settings(loaded)
    on_disk = json.loads(S.settings_path().read_text())
    assert on_disk["n_ctx"] == 2048 and on_disk["threads"] == 3
    assert on_disk["sampling"]["top_k"] == S.SamplingDefaults().top_k


def _check_fallback(text: str, expect: str) -> None:
    path = S.settings_path()
    path.write_text(text)
    result = S.load_settings()
    assert result.warning and expect in result.warning
    assert result.settings.n_ctx == S.Settings.model_fields["n_ctx"].default
    assert result.backup is not None and result.backup.read_text() == text
    assert result.backup.name.startswith("settings.json.bak-")
    assert not path.exists()
    assert S.load_settings().warning is None  # next start is clean


def test_broken_json_falls_back():
    _check_fallback("{not json", "not valid JSON")


def test_invalid_values_fall_back():
    _check_fallback(json.dumps({"version": 1, "n_ctx": -5}), "n_ctx")


def test_too_many_threads_are_refused_in_one_line(monkeypatch):
    """1024 threads passed validation and the engine then died ("libgomp: Thread creation failed")."""
    import pytest
    from pydantic import ValidationError

    _check_fallback(json.dumps({"version": 1, "threads": 1024}), f"at most {S.MAX_THREADS} threads, got 1024")
    S.settings_path().write_text(json.dumps({"version": 1, "threads": S.MAX_THREADS}))
    ok = S.load_settings()
    assert ok.warning is None and ok.settings.threads == S.MAX_THREADS
    monkeypatch.setenv("ROOFLINE_THREADS", "1024")
    env = S.load_settings()
    assert env.warning and "environment" in env.warning and "at most" in env.warning and "\n" not in env.warning
    assert env.settings.threads == S.MAX_THREADS  # the file's value stands
    monkeypatch.delenv("ROOFLINE_THREADS")
    S.settings_path().write_text(json.dumps({"version": 1, "presets": {"m": {"threads": 4096}, "n": {"threads": 8}}}))
    presets = S.load_settings()  # one bad preset is dropped alone, with the reason
    assert presets.warning and "'m'" in presets.warning and "at most" in presets.warning
    assert list(presets.settings.presets) == ["n"]
    with pytest.raises(ValidationError, match="at most"):
        presets.settings.threads = 1024  # what the settings dialog assigns


def test_future_version_falls_back():
    _check_fallback(json.dumps({"version": S.SETTINGS_VERSION + 1, "n_ctx": 9999}), "newer Roofline")


def test_bad_env_is_ignored_with_warning(monkeypatch):
    monkeypatch.setenv("ROOFLINE_N_CTX", "lots")
    result = S.load_settings()
    assert result.warning and "environment" in result.warning
    assert result.settings.n_ctx == 4096


def test_broken_file_in_a_read_only_folder_is_left_alone(roofline_home, monkeypatch):
    """Moving the bad file aside can fail (read-only config folder): defaults, a warning, nothing touched."""
    import os as _os

    path = S.settings_path()
    path.write_text("{broken")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_os, "replace", refuse)
    result = S.load_settings()
    assert result.settings.n_ctx == S.Settings().n_ctx
    assert result.backup is None and "left untouched" in (result.warning or "")
    assert path.read_text() == "{broken"
