"""scripts/gpu_check: says plainly when there is no NVIDIA GPU, and its table arithmetic holds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_an_nvidia_gpu_it_says_so_and_exits_0(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    mod = _script()
    monkeypatch.setattr(mod, "nvidia_gpus", list)
    built: list[bool] = []
    monkeypatch.setattr(mod, "cuda_env", lambda: built.append(True))  # must not build anything
    monkeypatch.setattr(sys, "argv", ["gpu_check"])
    assert mod.main() == 0
    assert "no NVIDIA GPU" in capsys.readouterr().out and not built


def test_with_a_gpu_it_builds_for_cuda_when_llama_cpp_cannot_offload(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    mod = _script()
    monkeypatch.setattr(mod, "nvidia_gpus", lambda: ["NVIDIA H100"])
    monkeypatch.setattr(mod, "cuda_offload_here", lambda: False)
    calls: list[list[str]] = []
    monkeypatch.setattr(mod, "cuda_env", lambda: Path("/venv-cuda/bin/python"))

    class Done:
        returncode = 0

    monkeypatch.setattr(mod.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or Done())
    monkeypatch.setattr(sys, "argv", ["gpu_check", "-r", "2"])
    assert mod.main() == 0
    assert calls and calls[0][0] == "/venv-cuda/bin/python" and "--in-cuda-env" in calls[0]
    assert "NVIDIA H100" in capsys.readouterr().out
