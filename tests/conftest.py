"""Shared test set-up: an isolated ROOFLINE_HOME per test, offscreen Qt, the real default model once."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# hypothesis keeps caches in ./.hypothesis (inside the checkout) as soon as a test module is collected: give it
# a temporary folder instead, removed when the run ends.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="roofline-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)
set_hypothesis_home_dir(_HYPOTHESIS_HOME)

pytest_plugins = ["reliability_plugin", "pytester"]  # reliability counts printed at the end; sub-runs


@pytest.fixture(scope="session")
def default_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real embedded model (Gemma 3 270M Q4_K_M), assembled and verified once per run into a temporary
    ROOFLINE_HOME: a test run never writes into the user's own data folder."""
    from app.core.default_model import default_model_path

    saved = {name: os.environ.pop(name, None) for name in ("ROOFLINE_DEFAULT_MODEL", "ROOFLINE_HOME")}
    os.environ["ROOFLINE_HOME"] = str(tmp_path_factory.mktemp("default-model-home"))
    try:
        path = default_model_path()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
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
