"""scripts/gpu_check: says plainly when llama.cpp sees no GPU, builds for CUDA on NVIDIA without a GPU backend
(then runs itself there), and measures whatever device llama.cpp does see (the gpu test runs it on llvmpipe:
docs/bench/2026-12-02-gpu-check-llvmpipe.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.core.predict.hardware import LlamaDevice

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # main() sets GGML_VK_VISIBLE_DEVICES and ROOFLINE_HOME for itself: each is put back after the test
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "")  # recorded, so put back (or removed) after the test
    monkeypatch.setenv("ROOFLINE_HOME", "unused")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_a_gpu_llama_cpp_sees_it_says_so_and_exits_0(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    mod = _script()
    monkeypatch.setattr(mod, "offload_device", lambda: None)
    monkeypatch.setattr(mod, "nvidia_present", lambda: False)
    built: list[bool] = []
    monkeypatch.setattr(mod, "cuda_venv", lambda: built.append(True))  # must not build anything
    monkeypatch.setattr(sys, "argv", ["gpu_check", "--vk-devices", ""])
    assert mod.main() == 0
    assert "llama.cpp sees no GPU here" in capsys.readouterr().out and not built


def test_on_nvidia_without_a_gpu_backend_it_builds_for_cuda_and_runs_there(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _script()
    monkeypatch.setattr(mod, "offload_device", lambda: None)
    monkeypatch.setattr(mod, "nvidia_present", lambda: True)
    monkeypatch.setattr(mod, "cuda_venv", lambda: Path("/venv-cuda/bin/python"))
    calls: list[list[str]] = []

    class Done:
        returncode = 0

    monkeypatch.setattr(mod.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or Done())
    monkeypatch.setattr(sys, "argv", ["gpu_check", "-r", "2"])
    assert mod.main() == 0
    assert calls and calls[0][0] == "/venv-cuda/bin/python" and "--in-cuda-env" in calls[0]


def test_a_device_llama_cpp_sees_is_measured_with_small_sizes_on_a_software_device(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _script()
    pipe = LlamaDevice("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "gpu", "Vulkan", 2 << 30, 2 << 30)
    monkeypatch.setattr(mod, "offload_device", lambda: pipe)
    asked: list[tuple] = []
    monkeypatch.setattr(mod, "check", lambda *a: asked.append(a) or 0)
    monkeypatch.setattr(sys, "argv", ["gpu_check", "-r", "1"])
    assert mod.main() == 0 and asked == [(1, [16], 4, [], ["0", "half", "all"], "")]


def test_a_run_can_be_narrowed_and_bad_choices_get_one_line(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    mod = _script()
    pipe = LlamaDevice("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "gpu", "Vulkan", 2 << 30, 2 << 30)
    monkeypatch.setattr(mod, "offload_device", lambda: pipe)
    asked: list[tuple] = []
    monkeypatch.setattr(mod, "check", lambda *a: asked.append(a) or 0)
    monkeypatch.setattr(sys, "argv", ["gpu_check", "-p", "16,64", "--models", "llama-3.2-1b", "--levels", "0,half",
                                      "--json", "rows.json"])
    assert mod.main() == 0 and asked == [(2, [16, 64], 4, ["llama-3.2-1b"], ["0", "half"], "rows.json")]
    for bad in (["-p", "sixteen"], ["--levels", "most"], ["--models", "gpt-5"], ["-p", "0"]):
        monkeypatch.setattr(sys, "argv", ["gpu_check", *bad])
        assert mod.main() == 2
        out = capsys.readouterr().out
        assert len(out.strip().splitlines()) == 1 and "Traceback" not in out, out
    assert len(asked) == 1  # nothing was measured for them
