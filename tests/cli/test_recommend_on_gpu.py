"""Auto-fit under a VRAM budget on a real Vulkan device: `roofline recommend` with ROOFLINE_VRAM_BUDGET_GIB
pretends the device is that small; the n_gpu_layers it picks loads within the budget by llama.cpp's own
accounting, and one more layer would not have (the most that fits, not merely something that fits); a mixture of
experts keeps every layer on the device and the experts of the fewest blocks in RAM, one block fewer would not fit."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from vulkan_device import buffers, gpu_device, gpu_env, load_logs

pytestmark = pytest.mark.gpu
MiB = 1 << 20


def device_total(path: Path, ngl: int, name: str) -> float:
    _, log = load_logs(path, n_ctx=2048, n_batch=512, n_ubatch=512, n_gpu_layers=ngl, use_mmap=False)
    return sum(mib for (dev, _), mib in buffers(log).items() if dev == name)


@pytest.mark.parametrize("budget_mib", [200, 300])
def test_the_pick_for_a_budget_is_the_most_that_fits(tmp_path: Path, roofline_home: Path, budget_mib: int) -> None:
    device = gpu_device()
    path = write_zoo_model(replace(ZOO["qwen2.5-0.5b"], key="qwen-24l"), "Q4_K_M", tmp_path / "qwen.gguf")
    env = gpu_env() | {"ROOFLINE_VRAM_BUDGET_GIB": str(budget_mib / 1024), "ROOFLINE_HOME": str(roofline_home)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "recommend", "-m", str(path), "--ctx", "2048", "--json"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rec = json.loads(done.stdout)
    assert rec["budget"]["vram"] == budget_mib * MiB and rec["budget"]["gpu"] == device["description"]
    pick = rec["variants"][0]
    ngl = pick["n_gpu_layers"]
    assert pick["verdict"] == "partial GPU" and 0 < ngl < 25 and pick["n_ctx"] == 2048
    assert device_total(path, ngl, device["name"]) <= budget_mib  # it loads within the budget
    assert device_total(path, ngl + 1, device["name"]) > budget_mib  # and one more layer would not


def device_total_moe(path: Path, n_cpu_moe: int, name: str) -> float:
    _, log = load_logs(path, n_ctx=2048, n_batch=512, n_ubatch=512, n_gpu_layers=-1, use_mmap=False,
                       n_cpu_moe=n_cpu_moe)
    return sum(mib for (dev, _), mib in buffers(log).items() if dev == name)


def test_a_moe_over_the_budget_keeps_the_fewest_blocks_experts_in_ram(tmp_path: Path, roofline_home: Path) -> None:
    """A mixture of experts that does not fit whole: every layer on the device, the experts of the first N blocks
    in RAM (llama.cpp's --n-cpu-moe), N the fewest that fit by llama.cpp's own accounting."""
    device = gpu_device()
    path = write_zoo_model(replace(ZOO["olmoe-1b-7b"], key="olmoe-4l", n_layers=4), "Q4_0", tmp_path / "olmoe.gguf")
    whole, none = device_total_moe(path, 0, device["name"]), device_total_moe(path, 4, device["name"])
    budget_mib = (whole + none) / 2  # room for about half the experts
    env = gpu_env() | {"ROOFLINE_VRAM_BUDGET_GIB": str(budget_mib / 1024), "ROOFLINE_HOME": str(roofline_home)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "recommend", "-m", str(path), "--ctx", "2048", "--json"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    pick = json.loads(done.stdout)["variants"][0]
    n = pick["n_cpu_moe"]
    assert pick["n_gpu_layers"] in (-1, 5) and 0 < n < 4, pick
    assert device_total_moe(path, n, device["name"]) <= budget_mib  # it loads within the budget
    assert device_total_moe(path, n - 1, device["name"]) > budget_mib  # one block's experts fewer in RAM would not
