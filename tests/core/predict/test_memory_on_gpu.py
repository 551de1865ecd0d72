"""The memory estimate per device against llama.cpp's own buffer logs on a real Vulkan device (Mesa's llvmpipe in
CI): four zoo shapes — dense with a tied 152k vocabulary, sliding-window with a 256k vocabulary, a mixture of
experts, a q8_0 KV cache with flash attention — at no layer, about half and every layer offloaded, and MoE experts
kept in RAM. Zoo files are the real models' shapes with fewer blocks (llvmpipe's 2 GiB), sparse on disk.

Weights and KV are placed byte for byte (each device within 2 %), the CPU side's total within 2 %, and the device's
total within 2 %, its compute buffer included (copies of host weights at a partial offload too). A case whose
compute buffer is not modelled goes in COMPUTE_NOT_MODELLED as an expected failure, strict: it fails the run the day
it starts passing, so the list stays true.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from app.core.gguf.info import inspect_gguf
from app.core.predict.memory import MemoryConfig, MemoryEstimate, MiB, estimate_memory
from vulkan_device import buffers, gpu_device, load_logs

pytestmark = pytest.mark.gpu
GGML_TYPES = {"f16": 1, "q8_0": 8}
SHAPES = {"dense": ("qwen2.5-0.5b", "Q4_K_M", 24, "f16"), "swa": ("gemma-2-2b", "Q4_K_M", 6, "f16"),
          "moe": ("olmoe-1b-7b", "Q4_0", 4, "f16"), "q8_0-kv": ("qwen2.5-0.5b", "Q4_K_M", 24, "q8_0")}
COMPUTE_NOT_MODELLED: set[tuple[str, int | str]] = set()  # every case is modelled now
CASES = [(shape, level) for shape in SHAPES for level in (0, "half", "all")] + [("moe-experts-in-ram", "all")]


@pytest.fixture(scope="module")
def device() -> dict[str, Any]:
    return gpu_device()


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu-zoo")


_LOADED: dict[tuple[str, int | str], tuple[MemoryEstimate, dict]] = {}


def _load(shape: str, level: int | str, zoo_dir: Path, device: dict[str, Any]) -> tuple[MemoryEstimate, dict]:
    """(estimate, llama.cpp's buffers) of one case, loaded once per run (both tests read it)."""
    if (shape, level) not in _LOADED:
        _LOADED[(shape, level)] = _estimate_and_load(shape, level, zoo_dir, device)
    return _LOADED[(shape, level)]


def _estimate_and_load(shape: str, level: int | str, zoo_dir: Path,
                       device: dict[str, Any]) -> tuple[MemoryEstimate, dict]:
    key, quant, layers, kv = SHAPES["moe" if shape == "moe-experts-in-ram" else shape]
    spec = replace(ZOO[key], key=f"{key}-{layers}l", n_layers=layers)
    path = zoo_dir / f"{spec.key}-{quant}.gguf"
    if not path.exists():
        write_zoo_model(spec, quant, path)
    ngl = {0: 0, "half": layers // 2, "all": -1}[level]
    n_cpu_moe = 2 if shape == "moe-experts-in-ram" else 0
    _, log = load_logs(path, n_ctx=2048, n_batch=512, n_ubatch=512, type_k=GGML_TYPES[kv], type_v=GGML_TYPES[kv],
                       flash_attn=kv != "f16", n_gpu_layers=ngl, use_mmap=False, n_cpu_moe=n_cpu_moe)
    cfg = MemoryConfig(n_ctx=2048, type_k=kv, type_v=kv, n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe, gpu_present=True,
                       gpu_max_matrix=device["max_matrix_bytes"], gpu_backend=device["backend"].lower())
    return estimate_memory(inspect_gguf(path), cfg), buffers(log)


def _sides(measured: dict[tuple[str, str], float], name: str) -> dict[str, dict[str, float]]:
    """{"gpu"|"cpu": {kind: MiB}}: the device's own buffers, and everything in host memory (CPU, its host
    buffer "Vulkan_Host", the repacking one)."""
    out: dict[str, dict[str, float]] = {"gpu": {}, "cpu": {}}
    for (dev, kind), mib in measured.items():
        side = out["gpu" if dev == name else "cpu"]
        side[kind] = side.get(kind, 0.0) + mib
    return out


@pytest.mark.parametrize("shape,level", [
    pytest.param(s, lv, marks=pytest.mark.xfail(strict=True, reason="compute buffer not modelled yet"))
    if (s, lv) in COMPUTE_NOT_MODELLED else (s, lv) for s, lv in CASES])
def test_device_total_within_2_percent(shape: str, level: int | str, zoo_dir: Path, device: dict[str, Any]) -> None:
    est, measured = _load(shape, level, zoo_dir, device)
    gpu = sum(_sides(measured, device["name"])["gpu"].values())
    assert est.gpu.total / MiB == pytest.approx(gpu, rel=0.02, abs=0.1)


@pytest.mark.parametrize("shape,level", CASES)
def test_weights_kv_and_the_cpu_side_per_device(shape: str, level: int | str, zoo_dir: Path,
                                                device: dict[str, Any]) -> None:
    est, measured = _load(shape, level, zoo_dir, device)
    sides = _sides(measured, device["name"])
    for side, mem in (("gpu", est.gpu), ("cpu", est.cpu)):
        got = sides[side]
        assert (mem.weights + mem.repack) / MiB == pytest.approx(got.get("model", 0.0), rel=0.02, abs=0.1), side
        assert mem.kv / MiB == pytest.approx(got.get("KV", 0.0), rel=0.02, abs=0.1), side
    assert est.cpu.total / MiB == pytest.approx(sum(sides["cpu"].values()), rel=0.02, abs=0.1)
    if shape == "moe-experts-in-ram":
        assert est.n_cpu_moe == 2 and est.layers_on_gpu == SHAPES["moe"][2]
