"""`roofline chat` on the real default model loads with what settings.json and the model's preset say (the
engine's own n_ctx is checked), names where each value came from, and lets a flag win over both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.config import settings as S
from app.core.models.presets import preset_key

pytestmark = pytest.mark.model


def chat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "chat", "-t", "2", "-n", "2", *args],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ), check=False)


def _write_settings(data: dict) -> None:
    path = S.settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_chat_allocates_the_context_saved_in_settings(default_model: Path) -> None:
    _write_settings({"n_ctx": 1536, "kv_cache_type": "q8_0", "flash_attn": True})  # no -m: the default model
    res = chat("--raw", "--temp", "0", "--json", "Once upon a time")
    assert res.returncode == 0, res.stderr
    load = json.loads(res.stdout)["load"]
    assert (load["n_ctx"], load["type_k"]) == (1536, "q8_0")  # what the engine reports it allocated
    assert load["sources"]["n_ctx"] == "settings" and load["sources"]["n_threads"] == "flag"
    res = chat("--raw", "--temp", "0", "Once upon a time")
    assert res.returncode == 0, res.stderr
    assert "ctx 1536 (settings)" in res.stderr and "context: 1536 tokens" in res.stderr


def test_chat_applies_the_models_preset_and_a_flag_wins(default_model: Path) -> None:
    _write_settings({"n_ctx": 1536, "presets": {preset_key(default_model): {
        "n_ctx": 1024, "sampling": {"max_tokens": 3, "temperature": 0.0}, "system_prompt": "Answer in French."}}})
    res = subprocess.run([sys.executable, "-m", "app.cli", "chat", "-t", "2", "Hello"], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ), check=False)  # no -n: the preset's max_tokens
    assert res.returncode == 0, res.stderr
    assert "ctx 1024 (preset)" in res.stderr and "context: 1024 tokens" in res.stderr
    assert "n 3 (preset)" in res.stderr and "system  : 17 chars (preset)" in res.stderr
    assert f"preset  : {preset_key(default_model)}" in res.stderr
    res = chat("--json", "-c", "768", "Hello")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["load"]["n_ctx"] == 768 and out["load"]["sources"]["n_ctx"] == "flag"
    assert out["metrics"]["generated_tokens"] <= 2  # -n 2 (a flag) over the preset's 3


def test_chat_names_a_broken_preset_and_goes_on(default_model: Path) -> None:
    _write_settings({"n_ctx": 1536, "presets": {preset_key(default_model): {"n_ctx": -5}}})
    res = chat("--raw", "Once upon a time")
    assert res.returncode == 0, res.stderr
    assert "invalid model preset" in res.stderr and "ctx 1536 (settings)" in res.stderr
    assert "Traceback" not in res.stderr
