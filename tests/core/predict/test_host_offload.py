"""The CPU side of a load with a GPU device in use (n_gpu_layers 0 or a partial offload): llama.cpp keeps those
weights in the device's host buffer, not repacked, so the CPU runs its plain kernels on them; a micro-batch of 32
tokens or more runs on the device whole, the host weights copied to it each time (a MoE's routed experts only).
(llama.cpp's own assignment of those products, on a real Vulkan device: test_host_offload_on_gpu.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from app.core.gguf.info import GGUFInfo, inspect_gguf
from app.core.predict import calibration
from app.core.predict.host_offload import (
    HOST_LINK_GBS,
    experts_touched,
    micro_batches,
    offloaded_prefill,
    offloaded_share,
    output_side,
)
from app.core.predict.memory import MemoryConfig
from app.core.predict.rates import UNREPACKED, cpu_rates
from app.core.predict.repack import X86_AVX2
from app.core.predict.speed import DeviceRates, Rates, cost_parts, predict, prefill_flops, weight_groups

CPU = DeviceRates("cpu", 20.0, 1.0, 0.0, 100e9, decode_rates={"*": 5e9}, prefill_rates={"*": 100e9},
                  unrepacked={"Q4_K": (0.5, 0.25), "Q4_0": (0.8, 0.6)})
GPU = DeviceRates("gpu", 500.0, 1.0, 0.004, 20e12, t_layer_s=0.0001)
WITH_GPU, CPU_ONLY = Rates(CPU, GPU), Rates(CPU)
CFG = MemoryConfig(n_ctx=2048, cpu_features=X86_AVX2, gpu_present=True)  # a device visible, no layer offloaded


def zoo(tmp_path_factory: pytest.TempPathFactory, key: str, quant: str, layers: int) -> GGUFInfo:
    spec = replace(ZOO[key], key=f"{key}-{layers}l", n_layers=layers)
    return inspect_gguf(write_zoo_model(spec, quant, tmp_path_factory.mktemp("zoo") / f"{key}.gguf"))  # sparse


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> GGUFInfo:
    return zoo(tmp_path_factory, "llama-3.2-1b", "Q4_K_M", 4)  # Q4_K (repacked on AVX2), Q6_K (never)


@pytest.fixture(scope="module")
def olmoe(tmp_path_factory: pytest.TempPathFactory) -> GGUFInfo:
    return zoo(tmp_path_factory, "olmoe-1b-7b", "Q4_0", 4)


def test_cpu_layers_beside_a_device_run_the_plain_kernels(llama: GGUFInfo) -> None:
    alone = cost_parts(llama, CPU_ONLY, CFG)["cpu"]  # no device: the repacked rates
    beside = cost_parts(llama, WITH_GPU, CFG)["cpu"]
    q4k, q6k = alone.types.index("Q4_K"), alone.types.index("Q6_K")
    assert beside.alu[q4k] == pytest.approx(alone.alu[q4k] / 0.5)  # the plain Q4_K decode kernel: half the rate
    assert beside.alu[q6k] == pytest.approx(alone.alu[q6k])  # Q6_K is not repacked on x86 either way
    assert beside.mem == alone.mem  # the same bytes
    slower = predict(llama, WITH_GPU, CFG, n_prompt=16)
    assert slower.decode_s_per_token > predict(llama, CPU_ONLY, CFG, n_prompt=16).decode_s_per_token
    # a 16-token prompt stays on the CPU: its Q4_K products at the plain kernels' prefill rate
    short = cost_parts(llama, WITH_GPU, CFG, n_prompt=16)["cpu"]
    short_alone = cost_parts(llama, CPU_ONLY, CFG, n_prompt=16)["cpu"]
    assert short.alu[q4k] == pytest.approx(short_alone.alu[q4k] / 0.25)


def test_no_plain_kernels_where_nothing_would_be_repacked(llama: GGUFInfo) -> None:
    no_repack = replace(CFG, cpu_features=frozenset())  # a CPU without the repacked kernels
    assert cost_parts(llama, WITH_GPU, no_repack)["cpu"].alu == cost_parts(llama, CPU_ONLY, no_repack)["cpu"].alu
    hidden = replace(CFG, gpu_present=False)  # the device not in use at n_gpu_layers 0: a CPU load
    assert cost_parts(llama, WITH_GPU, hidden)["cpu"].alu == cost_parts(llama, CPU_ONLY, CFG)["cpu"].alu


def test_partial_offload_decodes_its_cpu_layers_with_the_plain_kernels(llama: GGUFInfo) -> None:
    half = replace(CFG, n_gpu_layers=2)
    cpu_side = cost_parts(llama, WITH_GPU, half)["cpu"]
    q4k = cpu_side.types.index("Q4_K")
    q4k_weights = weight_groups(llama, half)["cpu"]["Q4_K"].elements
    assert cpu_side.alu[q4k] == pytest.approx(q4k_weights / (5e9 * 0.5))


def test_a_micro_batch_of_32_tokens_runs_on_the_device(llama: GGUFInfo) -> None:
    faster_cpu = Rates(replace(CPU, prefill_rates={"*": 400e9}), GPU)
    faster_gpu = Rates(CPU, replace(GPU, prefill_flops=80e12))
    for n, on_device in ((31, False), (32, True)):
        base = predict(llama, WITH_GPU, CFG, n_prompt=n).prefill_tps
        assert (predict(llama, faster_cpu, CFG, n_prompt=n).prefill_tps != base) is not on_device
        assert (predict(llama, faster_gpu, CFG, n_prompt=n).prefill_tps != base) is on_device


def test_an_offloaded_prompt_pays_the_host_weights_copy_and_the_device_compute(llama: GGUFInfo) -> None:
    n = 512
    pred = predict(llama, WITH_GPU, CFG, n_prompt=n)
    out_dev, _, out_bytes, out_weights = output_side(llama, CFG)  # type: ignore[misc]
    assert out_dev == "cpu"  # no layer offloaded: the output stays, and its one-token product runs there
    host = sum(g.bytes_all for g in weight_groups(llama, CFG)["cpu"].values()) - out_bytes
    assert host > 0.8 * sum(llama.layer_bytes)
    expected = (host / (HOST_LINK_GBS * 1e9) + sum(prefill_flops(llama, n)[1]) / GPU.prefill_flops
                + max(out_bytes / CPU.effective_bandwidth, out_weights / 5e9) + 0.004 + 0.0001 * llama.n_layers)
    assert n / pred.prefill_tps == pytest.approx(expected)
    # with the whole model on the device nothing is copied: faster than any CPU-layer placement
    full = predict(llama, WITH_GPU, replace(CFG, n_gpu_layers=-1), n_prompt=n)
    assert full.prefill_tps > pred.prefill_tps > predict(llama, CPU_ONLY, CFG, n_prompt=n).prefill_tps


def test_a_prompt_tail_under_32_tokens_runs_where_its_layers_are() -> None:
    cfg = MemoryConfig(n_batch=2048, n_ubatch=512, gpu_present=True)
    assert micro_batches(1100, cfg) == [512, 512, 76]
    assert offloaded_share(1100, cfg, has_gpu=True) == (1100, 3)
    assert offloaded_share(520, cfg, has_gpu=True) == (512, 1)  # 8 tokens left for the CPU layers
    assert offloaded_share(20, cfg, has_gpu=True) == (0, 0)
    assert offloaded_share(520, cfg, has_gpu=False) == (0, 0)
    assert micro_batches(1500, MemoryConfig(n_batch=1000, n_ubatch=512)) == [512, 488, 500]  # per llama_decode


def test_a_moe_copies_only_the_experts_a_micro_batch_routes_to(olmoe: GGUFInfo) -> None:
    assert experts_touched(1, 8, 64) == pytest.approx(8 / 64)
    assert experts_touched(32, 8, 64) == pytest.approx(1 - (56 / 64) ** 32)
    assert experts_touched(512, 8, 64) == pytest.approx(1.0)
    free = replace(GPU, prefill_flops=1e30, t0_s=0.0, t_layer_s=0.0)  # only the copy is left
    groups = weight_groups(olmoe, CFG)
    for tokens in (32, 64):
        secs, _, _ = offloaded_prefill(free, CPU, groups, 0.0, tokens, 1, olmoe.n_layers, (8, 64), None, False,
                                       frozenset())
        layer_bytes = sum(t.n_bytes * (experts_touched(tokens, 8, 64) if "_exps." in t.name else 1.0)
                          for t in olmoe.tensors if t.name.startswith("blk."))
        assert secs == pytest.approx((layer_bytes + olmoe.output_bytes) / (HOST_LINK_GBS * 1e9))


def test_the_plain_kernel_factors_reach_the_rates_and_survive_calibration() -> None:
    rates = cpu_rates(20.0, 100e9, "probe", threads=1)
    assert rates.unrepacked == UNREPACKED and UNREPACKED
    for t, (dec, pre) in UNREPACKED.items():
        assert rates.decode_rate(t, repacked=False) == pytest.approx(rates.decode_rate(t) * dec)
        assert rates.prefill_rate(t, repacked=False) == pytest.approx(rates.prefill_rate(t) * pre)
    cal = calibration.Calibration("m", "cpu", 18.0, 0.0005, False, 150.0, 4, 4, decode_scale=2.0)
    scaled = calibration.apply(rates, cal)
    assert scaled.decode_rate("Q4_K", repacked=False) == pytest.approx(2 * rates.decode_rate("Q4_K", repacked=False))

