"""The device probe through ggml's C API: one JSON line on a real device, one-line errors otherwise.

Each run is a child process (`python -m app.engine.llama.device_probe`), as the app runs it. The CPU device is
there in every build (`live_probe`); the `gpu` tests measure a GPU backend's device (on a machine without a GPU,
Mesa's llvmpipe through `GGML_VK_VISIBLE_DEVICES=0`, set in the child's environment only) and skip when the
installed llama.cpp has no GPU backend or sees no GPU device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.core.predict.hardware import llama_cpp_gpu_backends
from app.engine.llama.device_probe import TYPES, sample_weights

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["--matrix-mib", "16", "--types", "F16,Q4_0", "--budget-s", "0.05"]
GPU_ENV = {"GGML_VK_VISIBLE_DEVICES": "0"}  # llama.cpp's Vulkan backend leaves CPU-type devices out otherwise


def probe(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "app.engine.llama.device_probe", *args], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout,
                          check=False)
    return done.returncode, done.stdout, done.stderr


def test_sample_weights_have_a_small_scale_in_every_block() -> None:
    raw = sample_weights("Q8_0", 34 * 100)
    blocks = np.frombuffer(raw, np.uint8).reshape(100, 34)
    assert (blocks[:, :2].copy().view(np.float16) == np.float16(0.002)).all()
    q6 = np.frombuffer(sample_weights("Q6_K", 210 * 3), np.uint8).reshape(3, 210)
    assert (q6[:, TYPES["Q6_K"][3]].copy().view(np.float16) == np.float16(0.002)).all()
    f16 = np.frombuffer(sample_weights("F16", 2000), np.float16)
    assert np.isfinite(f16).all() and 0 < float(np.abs(f16).max()) < 1


@pytest.mark.live_probe
def test_the_cpu_device_is_measured() -> None:
    code, out, _ = probe("--device", "CPU", "--json", *SMALL)
    assert code == 0, out
    (line,) = out.splitlines()
    data = json.loads(line)
    assert data["device"] == "CPU" and data["type"] == "cpu" and set(data["matvec_gbs"]) == {"F16", "Q4_0"}
    assert data["read_gbs"] == max(data["matvec_gbs"].values()) > 0
    assert data["copy_gbs"] > 0 and data["gemm_gflops"] > 0 and data["node_us"] > 0
    assert 4 << 20 <= data["matrix_bytes"] <= 16 << 20


@pytest.mark.live_probe
@pytest.mark.parametrize(("args", "message"), [
    (["--device", "NoSuchDevice0"], "no ggml device called 'NoSuchDevice0' (devices: CPU"),
    (["--device", "CPU", "--types", "Q9_9"], "unknown weight type(s) Q9_9"),
    ([], "name a device with --device"),
])
def test_refusals_are_one_json_line(args: list[str], message: str) -> None:
    code, out, err = probe(*args, "--json")
    assert code == 1 and "Traceback" not in out + err
    (line,) = out.splitlines()
    assert message in json.loads(line)["error"]


def _gpu_devices() -> list[dict[str, object]]:
    if not llama_cpp_gpu_backends():
        pytest.skip("the installed llama.cpp has no GPU backend (a CPU-only build)")
    code, out, _ = probe("--list", "--json", env=GPU_ENV, timeout=120)
    assert code == 0, out
    found = [d for d in json.loads(out.splitlines()[-1])["devices"] if d["type"] in ("gpu", "igpu")]
    if not found:
        pytest.skip("llama.cpp sees no Vulkan or CUDA device here")
    return found


@pytest.mark.gpu
def test_a_gpu_device_is_measured_on_the_device() -> None:
    device = _gpu_devices()[0]
    code, out, err = probe("--device", str(device["name"]), "--json", *SMALL, env=GPU_ENV)
    assert code == 0, out + err[-2000:]
    data = json.loads(out.splitlines()[-1])
    assert data["device"] == device["name"] and data["backend"] in ("Vulkan", "CUDA", "Metal", "ROCm", "HIP")
    assert data["read_gbs"] > 0 and data["copy_gbs"] > 0 and data["gemm_gflops"] > 0 and data["node_us"] > 0
