"""MoE expert placement in the estimates and the recommender: the expert matrices of the first N blocks stay in
RAM (llama.cpp's --n-cpu-moe) while everything else is offloaded; a VRAM budget picks the fewest such blocks.
(The same placement against llama.cpp's own buffer logs on a real Vulkan device: tests/core/predict/
test_memory_on_gpu.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import GGUFInfo, inspect_gguf
from app.core.predict.bandwidth import BandwidthResult
from app.core.predict.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo
from app.core.predict.memory import MemoryConfig, estimate_memory, is_expert_tensor
from app.core.predict.recommend import FULL, PARTIAL, Budget, Candidate, Machine, experts_in_ram, place, recommend
from app.core.predict.speed import decode_traffic, default_rates

BW = BandwidthResult(read_gbs=40.0, copy_gbs=30.0, threads=8, buffer_bytes=1 << 28, runs=5, seconds=1.0,
                     measured_at="recorded", gemm_gflops=400.0)
CPU = CPUInfo("AMD Ryzen 7 5800X", "x86_64", 8, 16, ["AVX2", "F16C", "FMA"])


@pytest.fixture(scope="module")
def olmoe(tmp_path_factory: pytest.TempPathFactory) -> GGUFInfo:
    return inspect_gguf(zoo_path("olmoe-1b-7b", "Q4_K_M", tmp_path_factory.mktemp("zoo")))  # sparse: a few MB


def experts_of(info: GGUFInfo, blocks: range) -> int:
    return sum(t.n_bytes for t in info.tensors
               if t.name.startswith("blk.") and int(t.name.split(".")[1]) in blocks and is_expert_tensor(t.name))


def test_kept_experts_move_from_the_gpu_to_ram_byte_for_byte(olmoe: GGUFInfo) -> None:
    full = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1))
    kept = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1, n_cpu_moe=5))
    moved = experts_of(olmoe, range(5))
    assert moved > 0
    assert full.gpu.weights - kept.gpu.weights == moved
    assert kept.cpu.weights - full.cpu.weights == moved
    assert kept.cpu.repack == full.cpu.repack  # a plain CPU buffer: llama.cpp does not repack overridden tensors
    assert (kept.cpu.kv, kept.gpu.kv) == (full.cpu.kv, full.gpu.kv)  # the blocks themselves stay offloaded
    assert kept.n_cpu_moe == 5 and kept.layers_on_gpu == olmoe.n_layers


def test_blocks_left_on_the_cpu_are_not_moved_twice(olmoe: GGUFInfo) -> None:
    # Blocks below the offloaded ones are on the CPU already: their experts are repacked there as before.
    cpu_blocks = olmoe.n_layers - 6 + 1  # n_gpu_layers 6: the output and the last 5 blocks on the GPU
    plain = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=6))
    kept = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=6, n_cpu_moe=cpu_blocks))
    assert kept.gpu.weights == plain.gpu.weights and kept.cpu.repack == plain.cpu.repack


def test_a_dense_model_ignores_it(tmp_path: Path) -> None:
    info = inspect_gguf(zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path))
    a = estimate_memory(info, MemoryConfig(n_ctx=2048, n_gpu_layers=-1))
    b = estimate_memory(info, MemoryConfig(n_ctx=2048, n_gpu_layers=-1, n_cpu_moe=8))
    assert (a.gpu.total, a.cpu.total, b.n_cpu_moe) == (b.gpu.total, b.cpu.total, 0)


def test_decode_reads_the_kept_experts_from_ram(olmoe: GGUFInfo) -> None:
    gpu_all = decode_traffic(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1), depth=0)
    kept = decode_traffic(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1, n_cpu_moe=4), depth=0)
    share = olmoe.expert_used_count / olmoe.expert_count  # a token reads its chosen experts only
    assert kept.weights["cpu"] - gpu_all.weights["cpu"] == pytest.approx(experts_of(olmoe, range(4)) * share)
    assert gpu_all.weights["gpu"] - kept.weights["gpu"] == pytest.approx(experts_of(olmoe, range(4)) * share)


def budget_for(vram: int) -> Budget:
    gpu = GPUInfo("nvidia", "a GPU", vram, vram, 448.0)
    return Budget(ram=64 * GiB, vram=vram, unified=False, gpu=gpu)


def test_a_vram_budget_picks_the_fewest_blocks_with_experts_in_ram(olmoe: GGUFInfo) -> None:
    full = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1))
    budget = budget_for(int(full.gpu.total * 0.6))
    est = experts_in_ram(olmoe, 2048, "f16", budget)
    assert est is not None and 0 < est.n_cpu_moe < olmoe.n_layers
    assert est.gpu.total <= budget.vram
    one_less = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1, n_cpu_moe=est.n_cpu_moe - 1))
    assert one_less.gpu.total > budget.vram  # the fewest: one block fewer does not fit
    verdict, ngl, placed = place(olmoe, 2048, "f16", budget)
    assert (verdict, ngl, placed.n_cpu_moe) == (PARTIAL, olmoe.n_layers + 1, est.n_cpu_moe)


def test_a_gpu_that_holds_it_all_keeps_no_experts_in_ram(olmoe: GGUFInfo) -> None:
    verdict, _, est = place(olmoe, 2048, "f16", budget_for(64 * GiB))
    assert verdict == FULL and est.n_cpu_moe == 0


def test_too_small_for_even_the_shared_weights_falls_back_to_fewer_layers(olmoe: GGUFInfo) -> None:
    all_kept = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1, n_cpu_moe=olmoe.n_layers))
    budget = budget_for(int(all_kept.gpu.total * 0.8))
    assert experts_in_ram(olmoe, 2048, "f16", budget) is None
    verdict, ngl, est = place(olmoe, 2048, "f16", budget)
    assert verdict == PARTIAL and ngl <= olmoe.n_layers and est.n_cpu_moe == 0


def test_the_recommendation_says_how_to_run_it(olmoe: GGUFInfo) -> None:
    full = estimate_memory(olmoe, MemoryConfig(n_ctx=2048, n_gpu_layers=-1))
    gpu = GPUInfo("nvidia", "NVIDIA GeForce RTX 4060", full.gpu.total, full.gpu.total, 272.0, "8.9")
    hw = HardwareInfo(CPU, 64 * GiB, 60 * GiB, [gpu], True)
    rec = recommend([Candidate(olmoe)], Machine(hw, default_rates(hw, BW)), n_ctx=2048)
    pick = rec.pick
    assert pick is not None and pick.verdict == PARTIAL and pick.n_cpu_moe > 0
    assert f"--n-cpu-moe {pick.n_cpu_moe}" in rec.sentence
    assert rec.to_dict()["variants"][0]["n_cpu_moe"] == pick.n_cpu_moe
