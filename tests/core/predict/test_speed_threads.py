"""The thread count as an input of the speed model: kernel rates scale with the threads a load uses (up to
the physical cores), memory bandwidth saturates (one-thread and all-thread probes), the per-layer barrier
cost exists only with two threads or more, calibrations apply to their own thread count, and predictions
take the threads from the load plan (settings, preset, tune result, flags)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.config.settings import Settings
from app.core.gguf.info import inspect_gguf
from app.core.predict import calibration
from app.core.predict.bandwidth import BandwidthResult, load_cached, measure_bandwidth, store
from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
from app.core.predict.load_plan import planned_threads
from app.core.predict.memory import MemoryConfig
from app.core.predict.rates import (
    ETA_CPU,
    ETA_CPU_1T,
    NO_VNNI_DECODE,
    NO_VNNI_DEFAULT,
    NO_VNNI_PREFILL,
    T_LAYER_CPU,
    DeviceRates,
    bandwidth_for_threads,
    threads_for,
)
from app.core.predict.speed import Rates, default_rates, predict
from synth_gguf import write_synthetic_gguf


def _hw(physical: int = 4, logical: int = 8) -> HardwareInfo:
    return HardwareInfo(CPUInfo("test cpu", "x86_64", physical, logical, ["AVX2"]), 32 * GiB, 30 * GiB, [], False)


def _bw(read: float = 40.0, read_1t: float = 15.0, gemm: float = 200.0, threads: int = 4) -> BandwidthResult:
    return BandwidthResult(read_gbs=read, copy_gbs=0.0, threads=threads, buffer_bytes=0, runs=1, seconds=0.0,
                           measured_at="now", gemm_gflops=gemm, read_gbs_1t=read_1t)


def test_threads_follow_llama_cpp_defaults() -> None:
    assert threads_for(_hw(4, 8)) == (4, 8)  # physical cores decode, logical cores batch
    assert threads_for(_hw(4, 8), 2) == (2, 2)  # batches follow n_threads when only that is given
    assert threads_for(_hw(4, 8), 2, 6) == (2, 6)
    assert threads_for(None) == (1, 1)


def test_kernel_rates_scale_with_threads_up_to_the_cores() -> None:
    hw, bw = _hw(4, 8), _bw()
    r1, r2, r4 = (default_rates(hw, bw, threads=n).cpu for n in (1, 2, 4))
    assert r1.threads == 1 and r2.threads == 2 and r4.threads == 4
    for t in ("Q4_K", "Q8_0", "*"):
        assert r2.decode_rate(t) == pytest.approx(2 * r1.decode_rate(t))
        assert r4.decode_rate(t) == pytest.approx(4 * r1.decode_rate(t))
        assert r4.prefill_rate(t) == pytest.approx(4 * r1.prefill_rate(t))
    assert r4.prefill_flops == pytest.approx(4 * r1.prefill_flops)
    r8 = default_rates(hw, bw, threads=8).cpu  # hyper-threads share the cores' units: nothing gained
    assert r8.decode_rate("Q4_K") == pytest.approx(r4.decode_rate("Q4_K"))
    # the all-thread probe ran on 4 threads: 4 decode threads get exactly the probe's rate x the type factor
    assert r4.decode_rate("Q4_K") == pytest.approx(default_rates(hw, bw).cpu.decode_rate("Q4_K"))
    # prompt batches run on their own thread count
    split = default_rates(hw, bw, threads=1, batch_threads=4).cpu
    assert split.decode_rate("Q4_K") == pytest.approx(r1.decode_rate("Q4_K"))
    assert split.prefill_rate("Q4_K") == pytest.approx(r4.prefill_rate("Q4_K"))


def test_integer_kernels_without_vnni_run_slower_than_the_factors_say() -> None:
    """The per-type factors come from a CPU with AVX512_VNNI; an x86 CPU with AVX2 but neither VNNI runs
    llama.cpp's int8 dot products (every quantized type) slower against the same float32 probe, by type;
    float kernels, ARM and CPUs whose features are unknown keep the factors."""
    bw = _bw()
    def rates(features: list[str], arch: str = "x86_64") -> DeviceRates:
        hw = HardwareInfo(CPUInfo("c", arch, 4, 8, features), 32 * GiB, 30 * GiB, [], False)
        return default_rates(hw, bw, threads=4).cpu

    vnni, avx2 = rates(["AVX2", "AVX512F", "AVX512_VNNI"]), rates(["AVX2", "FMA"])
    assert rates(["AVX2", "AVX_VNNI"]).decode_rate("Q4_K") == vnni.decode_rate("Q4_K")
    assert rates([], "aarch64").decode_rate("Q4_K") == rates([]).decode_rate("Q4_K") == vnni.decode_rate("Q4_K")
    for t in ("Q4_K", "Q8_0", "Q4_0", "Q5_K"):
        assert avx2.decode_rate(t) == pytest.approx(vnni.decode_rate(t) * NO_VNNI_DECODE.get(t, NO_VNNI_DEFAULT))
        assert avx2.prefill_rate(t) == pytest.approx(vnni.prefill_rate(t) * NO_VNNI_PREFILL.get(t, NO_VNNI_DEFAULT))
        assert avx2.decode_rate(t) < vnni.decode_rate(t)
    assert avx2.decode_rate("F16") == vnni.decode_rate("F16") and avx2.prefill_rate("F32") == vnni.prefill_rate("F32")
    assert avx2.batch_rate("Q4_K", 4)[0] == pytest.approx(vnni.batch_rate("Q4_K", 4)[0] * NO_VNNI_DECODE["Q4_K"])
    assert avx2.decode_rate("IQ4_XS") < vnni.decode_rate("IQ4_XS")  # a type without its own factor: "*"


def test_bandwidth_saturates() -> None:
    hw, bw = _hw(4, 8), _bw(read=40.0, read_1t=15.0)
    gbs = [default_rates(hw, bw, threads=n).cpu.bandwidth_gbs for n in (1, 2, 3, 4, 8)]
    assert gbs == pytest.approx([15.0, 30.0, 40.0, 40.0, 40.0])
    assert bandwidth_for_threads(2, 40.0, 0.0, 4) == pytest.approx(20.0)  # no one-thread probe: a share


def test_barrier_cost_only_with_several_threads() -> None:
    hw, bw = _hw(4, 8), _bw()
    assert default_rates(hw, bw, threads=2).cpu.t_layer_s == T_LAYER_CPU
    assert default_rates(hw, bw, threads=1).cpu.t_layer_s < T_LAYER_CPU / 5


def test_predictions_for_the_threads(tmp_path: Path) -> None:
    info = inspect_gguf(write_synthetic_gguf(tmp_path / "m.gguf", n_layers=4, n_embd=1024, n_ff=4096, n_head=8,
                                             n_head_kv=4, n_vocab=4096, tensor_type="Q4_0"))
    hw, cfg = _hw(4, 8), MemoryConfig(n_ctx=1024)
    # memory plentiful: the kernels set the pace, so 4 threads decode and prefill ~4x as fast as one
    fast = _bw(read=4000.0, read_1t=4000.0)
    p1, p4 = (predict(info, Rates(default_rates(hw, fast, threads=n).cpu), cfg) for n in (1, 4))
    assert p1.threads == 1 and p4.threads == 4 and p1.decode_bound == "compute"
    assert p1.decode_compute_s == pytest.approx(4 * p4.decode_compute_s)
    assert p1.decode_memory_s == pytest.approx(p4.decode_memory_s * ETA_CPU / ETA_CPU_1T)  # same bandwidth
    assert 1.5 < p4.decode_tps / p1.decode_tps < 4.0  # four threads pay the barrier after each node
    assert p4.prefill_tps / p1.prefill_tps == pytest.approx(4.0, rel=0.1)
    # one thread already saturates the memory: more threads decode no faster than the busier memory allows
    # (several threads keep it busier than one that also computes: ETA_CPU vs ETA_CPU_1T; barriers cost)
    slow = _bw(read=0.5, read_1t=0.5, gemm=2000.0)
    s1, s4 = (predict(info, Rates(default_rates(hw, slow, threads=n).cpu), cfg) for n in (1, 4))
    assert s1.decode_bound == "memory bandwidth" and s4.decode_tps <= s1.decode_tps * ETA_CPU / ETA_CPU_1T


def test_calibration_applies_to_its_own_thread_count() -> None:
    hw = _hw(4, 8)
    r1, r4 = (default_rates(hw, _bw(), threads=n) for n in (1, 4))
    cal = calibration.Calibration("m", "cpu", effective_bandwidth_gbs=12.0, t0_s=0.001, t0_fitted=False,
                                  prefill_gflops=50.0, n_decode_samples=3, n_prefill_samples=1, n_threads=1)
    calibration.store(cal)
    assert calibration.calibrated_rates(r1, "m").cpu.calibrated
    assert not calibration.calibrated_rates(r4, "m").cpu.calibrated  # measured with one thread only
    calibration.store(dataclasses.replace(cal, n_threads=4, effective_bandwidth_gbs=30.0))
    assert calibration.calibrated_rates(r4, "m").cpu.effective_bandwidth == pytest.approx(30e9)
    assert calibration.calibrated_rates(r1, "m").cpu.effective_bandwidth == pytest.approx(12e9)


def test_planned_threads_follow_the_load_plan(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    assert planned_threads(model, Settings()) == (None, None)  # llama.cpp's default
    assert planned_threads(model, Settings(threads=3)) == (3, 3)
    assert planned_threads(model, Settings(threads=3), n_threads=1) == (1, 1)  # a flag wins


def test_bandwidth_probe_measures_one_thread_too() -> None:
    r = measure_bandwidth(threads=2, total_bytes=64 << 20, budget_s=0.5, max_runs=2)
    assert r.read_gbs_1t > 0 and r.read_gbs > 0 and r.gemm_gflops_1t > 0
    r.machine_key = "k"
    store(r)
    assert load_cached("k") is not None
    store(dataclasses.replace(r, read_gbs_1t=0.0))  # a probe from before the one-thread read: measure again
    assert load_cached("k") is None
    store(dataclasses.replace(r, gemm_gflops_1t=0.0))  # from before the one-core GEMM probe: measure again
    assert load_cached("k") is None


def test_kernels_scale_from_the_one_core_gemm_probe_when_there_is_one() -> None:
    hw = _hw(4, 8)
    bw = _bw(gemm=200.0)  # four threads of numpy: 50 each, less than one core alone reaches
    bw.gemm_gflops_1t = 80.0
    r1, r4 = (default_rates(hw, bw, threads=n).cpu for n in (1, 4))
    for t in ("Q4_K", "Q8_0", "*"):
        assert r4.decode_rate(t) == pytest.approx(4 * r1.decode_rate(t))
        assert r4.prefill_rate(t) == pytest.approx(4 * r1.prefill_rate(t))
    old = default_rates(hw, _bw(gemm=200.0), threads=4).cpu  # an older probe: the all-core figure as before
    assert r4.decode_rate("Q8_0") == pytest.approx(old.decode_rate("Q8_0") * 4 * 80 / 200)
