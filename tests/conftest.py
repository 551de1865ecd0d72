"""Shared test set-up: an isolated ROOFLINE_HOME per test, offscreen Qt, the real default model once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest_plugins = ["reliability_plugin"]  # counts printed at the end by the reliability suite


@pytest.fixture(scope="session")
def default_model() -> Path:
    """The real embedded model (Gemma 3 270M Q4_K_M), assembled and verified once."""
    from app.core.default_model import default_model_path

    saved = os.environ.pop("ROOFLINE_DEFAULT_MODEL", None)
    try:
        path = default_model_path()
    finally:
        if saved is not None:
            os.environ["ROOFLINE_DEFAULT_MODEL"] = saved
    return path


@pytest.fixture(autouse=True)
def roofline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """Every test gets its own data/config/cache dirs; the default model points at the shared copy."""
    home = tmp_path / "roofline-home"
    home.mkdir()
    if "default_model" in request.fixturenames:
        model = request.getfixturevalue("default_model")
        monkeypatch.setenv("ROOFLINE_DEFAULT_MODEL", str(model))
    monkeypatch.setenv("ROOFLINE_HOME", str(home))
    return home
