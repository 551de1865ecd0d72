"""The GPUs a load plans for are the devices the installed llama.cpp sees (an Intel GPU only Vulkan knows, a GPU
hidden by GGML_VK_VISIBLE_DEVICES left out), with the drivers' facts where names match; the vram_budget_gib
setting caps what the planner may use of it."""

from __future__ import annotations

import pytest

from app.core.predict.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo, LlamaDevice
from app.core.predict.recommend import Machine, memory_budget, vram_limit_from_settings

CPU = CPUInfo("Intel Core Ultra 7 155H", "x86_64", 16, 22, ["AVX2", "F16C", "FMA"])
CPU_DEVICE = LlamaDevice("CPU", "Intel Core Ultra 7 155H", "cpu", "CPU", 32 * GiB, 30 * GiB)
RTX = GPUInfo("nvidia", "NVIDIA GeForce RTX 4070", 12 * GiB, 11 * GiB, 504.2, "8.9", source="nvml")


def machine(gpus: list[GPUInfo], devices: list[LlamaDevice] | None) -> HardwareInfo:
    return HardwareInfo(CPU, 32 * GiB, 30 * GiB, gpus, True, llama_devices=devices)


def test_a_gpu_only_vulkan_sees_is_planned_for() -> None:
    arc = LlamaDevice("Vulkan0", "Intel(R) Arc(tm) Graphics (MTL)", "igpu", "Vulkan", 18 * GiB, 17 * GiB)
    hw = machine([], [CPU_DEVICE, arc])
    gpu = hw.best_gpu
    assert gpu is not None and (gpu.name, gpu.device, gpu.vendor) == (arc.description, "Vulkan0", "vulkan")
    assert gpu.unified_memory and gpu.memory_free == 17 * GiB
    assert memory_budget(hw).vram > 0


def test_the_drivers_facts_join_the_device_of_the_same_name() -> None:
    cuda = LlamaDevice("CUDA0", "NVIDIA GeForce RTX 4070", "gpu", "CUDA", 12 * GiB, 10 * GiB)
    gpu = machine([RTX], [CPU_DEVICE, cuda]).best_gpu
    assert gpu is not None and (gpu.bandwidth_gbs, gpu.compute_capability, gpu.device) == (504.2, "8.9", "CUDA0")
    assert gpu.memory_free == 10 * GiB  # what llama.cpp's backend reports now


def test_a_gpu_llama_cpp_does_not_see_is_not_planned_for_and_is_named() -> None:
    hw = machine([RTX], [CPU_DEVICE])  # e.g. a Vulkan build with CUDA_VISIBLE_DEVICES= or a CPU-only build
    assert hw.best_gpu is None and hw.hidden_gpus == [RTX]
    budget = memory_budget(hw)
    assert budget.vram == 0 and budget.gpu is None
    assert any("does not see it" in note for note in budget.notes)


def test_without_asking_llama_cpp_the_drivers_gpus_are_used() -> None:
    hw = machine([RTX], None)
    assert hw.best_gpu == RTX and hw.hidden_gpus == []


def test_llvmpipe_is_planned_for_when_llama_cpp_uses_it() -> None:
    pipe = LlamaDevice("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "gpu", "Vulkan", 23 * GiB, 23 * GiB)
    assert machine([], [CPU_DEVICE, pipe]).best_gpu is not None


def test_the_round_trip_keeps_the_devices() -> None:
    hw = machine([RTX], [CPU_DEVICE])
    assert HardwareInfo.from_dict(hw.to_dict()) == hw


def test_the_vram_budget_caps_the_plan() -> None:
    cuda = LlamaDevice("CUDA0", "NVIDIA GeForce RTX 4070", "gpu", "CUDA", 12 * GiB, 12 * GiB)
    hw = machine([RTX], [CPU_DEVICE, cuda])
    free = memory_budget(hw).vram
    capped = memory_budget(hw, vram_limit=2 * GiB)
    assert free > 2 * GiB and capped.vram == 2 * GiB
    assert any("vram_budget_gib" in note for note in capped.notes)
    assert memory_budget(hw, vram_limit=64 * GiB).vram == free  # a cap above what there is changes nothing


def test_the_setting_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert vram_limit_from_settings() is None
    monkeypatch.setenv("ROOFLINE_VRAM_BUDGET_GIB", "1.5")
    assert vram_limit_from_settings() == int(1.5 * GiB)
    m = Machine.from_system(llama_devices=[CPU_DEVICE])
    assert m.vram_limit == int(1.5 * GiB) and m.hw.llama_devices == [CPU_DEVICE]


def test_a_matrix_the_device_refuses_is_read_from_ram_and_held_there(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.core.bench.zoo import zoo_path
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.memory import MemoryConfig, estimate_memory
    from app.core.predict.speed import decode_traffic

    info = inspect_gguf(zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path))  # tied 152k x 896 output: 138 MiB
    out = next(t.n_bytes for t in info.tensors if t.name == "token_embd.weight")
    small, big = (MemoryConfig(n_ctx=2048, n_gpu_layers=-1, gpu_present=True, gpu_max_matrix=limit)
                  for limit in (128 << 20, 0))
    refused, taken = decode_traffic(info, small, 0), decode_traffic(info, big, 0)
    assert refused.weights["cpu"] - taken.weights["cpu"] == out == taken.weights["gpu"] - refused.weights["gpu"]
    held, copied = estimate_memory(info, small), estimate_memory(info, big)
    assert copied.gpu.weights - held.gpu.weights == out and not held.output_on_gpu  # no copy on the device
