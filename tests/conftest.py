"""Shared test set-up: an isolated ROOFLINE_HOME per test, offscreen Qt, the real default model once."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture(scope="module")
def server(default_model: Path) -> Iterator[str]:
    """URL of llama-cpp-python's OpenAI-compatible server on the default model (key `llama_server.KEY`),
    started once per test module that asks for it."""
    from llama_server import start_server

    proc, url = start_server(default_model)
    yield url
    proc.kill()
    proc.wait(10)
