"""Speed model: bytes per decode step, prefill FLOPs, rates, calibration fit and storage, and the
`roofline calibrate` command end to end through the engine on a tiny synthetic model."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from synth_gguf import write_synthetic_gguf

from app.core import calibration
from app.core.calibration import DecodeSample, PrefillSample, fit_decode, fit_prefill
from app.core.gguf_info import GGUFInfo, TensorInfo, inspect_gguf
from app.core.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo
from app.core.memory import MemoryConfig
from app.core.speed import (
    ETA_CPU,
    DeviceRates,
    Rates,
    decode_traffic,
    default_rates,
    offload_curve,
    predict,
    prefill_flops,
)


@pytest.fixture(scope="module")
def gemma(default_model: Path) -> GGUFInfo:
    return inspect_gguf(default_model)


def cpu_rates(bw: float = 20.0, eta: float = 0.5, t0: float = 0.002, flops: float = 100e9) -> Rates:
    return Rates(DeviceRates("cpu", bw, eta, t0, flops))


# ----------------------------------------------------------------------------- bytes and FLOPs


def test_decode_reads_layers_and_tied_output(gemma: GGUFInfo) -> None:
    t0 = decode_traffic(gemma, MemoryConfig(), depth=0, has_gpu=False)
    # every repeating layer + the output matrix (token_embd doubles as output: read once per token)
    assert t0.total == sum(gemma.layer_bytes) + gemma.token_embd_bytes
    assert abs(t0.total / 1e6 - 246.6) < 1  # reference: "a decode step reads essentially the whole file"
    t1000 = decode_traffic(gemma, MemoryConfig(), depth=1000, has_gpu=False)
    assert t1000.total - t0.total == 18 * 2 * 256 * 2 * 1000  # KV filled so far, f16
    q8 = decode_traffic(gemma, MemoryConfig(type_k="q8_0", type_v="q8_0", flash_attn=True), 1000, has_gpu=False)
    assert q8.total - t0.total == 18 * 2 * 256 * 34 // 32 * 1000


def test_sliding_window_cache_limits_reads(gemma: GGUFInfo) -> None:
    small = MemoryConfig(n_ctx=8192, swa_full=False)
    deep = decode_traffic(gemma, small, depth=8000, has_gpu=False).kv["cpu"]
    # 3 full layers read 8000 cells, 15 sliding layers at most their 1024-cell cache
    assert deep == 3 * 1024 * 8000 + 15 * 1024 * 1024


def test_prefill_flops_skip_embedding_lookup(gemma: GGUFInfo) -> None:
    total, per_layer = prefill_flops(gemma, 512)
    layer_params = sum(t.n_elements for t in gemma.tensors if t.name.startswith("blk.") and len(t.shape) > 1)
    assert sum(per_layer) > 2 * 512 * layer_params  # plus attention
    assert sum(per_layer) < 2 * 512 * layer_params * 1.2
    assert total - sum(per_layer) == 2 * 640 * 262144  # logits once per batch, not per token
    assert total / 512 < 2 * gemma.n_params / 2  # far less than "2 x all params" for this tied model


def test_moe_counts_active_experts_only(tmp_path: Path) -> None:
    info = inspect_gguf(write_synthetic_gguf(tmp_path / "m.gguf", n_layers=2))
    # graft 8 routed experts of which 2 are used onto layer 0 (shape-level: no weights needed)
    exp = TensorInfo("blk.0.ffn_up_exps.weight", "F32", [256, 512, 8], 256 * 512 * 8, 256 * 512 * 8 * 4, 0)
    moe = dataclasses.replace(info, expert_count=8, expert_used_count=2, tensors=[*info.tensors, exp],
                              layer_bytes=[info.layer_bytes[0] + exp.n_bytes, info.layer_bytes[1]],
                              expert_bytes=[exp.n_bytes, 0])
    dense = decode_traffic(info, MemoryConfig(n_ctx=512), 0, has_gpu=False).total
    sparse = decode_traffic(moe, MemoryConfig(n_ctx=512), 0, has_gpu=False).total
    assert sparse - dense == exp.n_bytes * 2 // 8


# ----------------------------------------------------------------------------- predictions


def test_prediction_formula_and_label(gemma: GGUFInfo) -> None:
    r = cpu_rates()
    p = predict(gemma, r, MemoryConfig(), depth=0, n_gen=1)
    assert p.decode_s_per_token == pytest.approx(p.bytes_per_token / (0.5 * 20e9) + 0.002)
    assert p.label == "uncalibrated" and p.decode_bound == "memory bandwidth"
    deeper = predict(gemma, r, MemoryConfig(), depth=4000, n_gen=1)
    assert deeper.decode_tps < p.decode_tps  # KV filled so far is read every token
    cal = Rates(dataclasses.replace(r.cpu, calibrated=True))
    assert predict(gemma, cal).label == "calibrated"
    faster = cpu_rates(flops=200e9)
    assert predict(gemma, faster).prefill_tps == pytest.approx(2 * predict(gemma, r).prefill_tps, rel=0.01)


def test_small_cpu_prefill_can_be_bandwidth_bound(gemma: GGUFInfo) -> None:
    slow_memory = cpu_rates(bw=0.5, flops=1e12)
    p = predict(gemma, slow_memory, n_prompt=512)
    assert p.prefill_bound == "memory bandwidth"


def test_default_rates_from_hardware() -> None:
    gpu = GPUInfo("nvidia", "RTX 4090", 24 * GiB, 23 * GiB, 1008.0, "8.9")
    hw = HardwareInfo(CPUInfo("x", "x86_64", 8, 16, ["AVX2"]), 32 * GiB, 30 * GiB, [gpu], True)
    r = default_rates(hw, None)
    assert r.cpu.efficiency == ETA_CPU and not r.cpu.calibrated
    assert r.gpu is not None and r.gpu.bandwidth_gbs == 1008.0 and 0.85 <= r.gpu.efficiency <= 0.95
    assert 0.003 <= r.gpu.t0_s <= 0.006  # published GPU overhead


def test_partial_offload_sums_devices(gemma: GGUFInfo) -> None:
    gpu = DeviceRates("gpu", 500.0, 0.9, 0.004, 50e12)
    rates = Rates(DeviceRates("cpu", 20.0, 0.65, 0.001, 100e9), gpu)
    curve = dict(offload_curve(gemma, rates))
    half = predict(gemma, rates, MemoryConfig(n_gpu_layers=10))
    by_dev = half.bytes_per_token_by_device
    expected = by_dev["cpu"] / (0.65 * 20e9) + by_dev["gpu"] / (0.9 * 500e9) + 0.004
    assert half.decode_s_per_token == pytest.approx(expected)
    assert curve[19] > curve[10] > curve[0]


# ----------------------------------------------------------------------------- calibration fit


def test_fit_recovers_rates_from_two_depths() -> None:
    eff, t0 = 12e9, 0.003
    rng = random.Random(3)
    samples = [DecodeSample(b, 1 / (b / eff + t0) * rng.uniform(0.99, 1.01))
               for b in (250e6, 250e6, 330e6, 330e6)]
    fit_eff, fit_t0, fitted = fit_decode(samples, t0_default=0.001)
    assert fitted
    assert fit_eff == pytest.approx(eff, rel=0.15) and fit_t0 == pytest.approx(t0, abs=0.0015)


def test_fit_with_one_size_keeps_default_overhead() -> None:
    samples = [DecodeSample(250e6, 40.0), DecodeSample(250e6, 42.0)]
    eff, t0, fitted = fit_decode(samples, t0_default=0.001)
    assert not fitted and t0 == 0.001
    assert eff == pytest.approx(250e6 / (1 / 41.0 - 0.001), rel=0.03)
    with pytest.raises(ValueError):
        fit_decode([], 0.001)
    # deeper samples far slower than their extra bytes explain (attention compute on a tiny model):
    # the line would need a negative overhead, so the empty-context samples decide
    steep = [DecodeSample(5e6, 400.0), DecodeSample(5e6, 420.0), DecodeSample(5.5e6, 200.0)]
    eff, t0, fitted = fit_decode(steep, t0_default=0.001)
    assert not fitted and 1 / (5e6 / eff + t0) == pytest.approx(410.0, rel=0.03)
    assert fit_prefill([PrefillSample(2e8, 300), PrefillSample(2e8, 320), PrefillSample(2e8, 10)]) == 2e8 * 300


def test_calibration_storage(tmp_path: Path) -> None:
    cal = calibration.calibrate("m1", "cpu", [DecodeSample(2.5e8, 40)], [PrefillSample(2e8, 300)], 0.001)
    calibration.store(cal)
    calibration.store(dataclasses.replace(cal, backend="gpu", effective_bandwidth_gbs=500.0))
    assert calibration.load("m1", "cpu") == cal
    assert calibration.load("m1", "gpu").effective_bandwidth_gbs == 500.0  # type: ignore[union-attr]
    assert calibration.load("m2", "cpu") is None
    calibration._path().write_text("[1, 2")
    assert calibration.load("m1", "cpu") is None  # damaged file: calibrate again


# ----------------------------------------------------------------------------- the command


@pytest.mark.model
def test_calibrate_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main
    from app.core.hardware import probe_hardware

    model = write_synthetic_gguf(tmp_path / "tiny.gguf", n_layers=2, n_ctx=2048)
    assert main(["calibrate", "-m", str(model), "--depth", "512", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cal = out["calibration"]
    assert cal["backend"] == "cpu" and cal["n_decode_samples"] >= 4 and cal["prefill_gflops"] > 0
    assert out["calibrated"]["label"] == "calibrated" and out["uncalibrated"]["label"] == "uncalibrated"
    stored = calibration.load(probe_hardware().machine_key, "cpu")
    assert stored is not None and stored.model == "tiny.gguf"
    # after calibrating, the prediction for the measured run sits inside the measured spread
    measured = out["measured_decode_tps"]
    assert min(measured) * 0.7 <= out["calibrated"]["decode_tps"] <= max(measured) * 1.3


def test_small_cpu_decode_hits_the_compute_roof(gemma: GGUFInfo) -> None:
    from app.core.bandwidth import BandwidthResult

    hw = HardwareInfo(CPUInfo("small", "x86_64", 2, 2, ["AVX2"]), 8 * GiB, 6 * GiB, [], False)
    fast_memory = BandwidthResult(read_gbs=100.0, copy_gbs=80.0, threads=2, buffer_bytes=1 << 28, runs=3,
                                  seconds=1.0, measured_at="recorded", gemm_gflops=50.0)
    rates = default_rates(hw, fast_memory)
    p = predict(gemma, rates, n_gen=1)
    assert p.decode_bound == "compute"
    # 2 FLOPs per multiplied weight, the tied 262k x 640 output included, at 0.2 x the GEMM rate
    flops = sum(2 * t.n_elements for t in gemma.tensors if t.name.startswith("blk.") and len(t.shape) > 1)
    flops += 2 * 262144 * 640
    assert p.decode_s_per_token == pytest.approx(flops / 10e9 + rates.cpu.t0_s, rel=0.001)
    # a calibration replaces both roofs by the one fitted effective bandwidth
    cal = calibration.Calibration("k", "cpu", 5.0, 0.001, True, 50.0, 3, 3)
    assert calibration.apply(rates.cpu, cal).decode_flops == 0.0


def test_gpu_with_unknown_bandwidth_still_predicts() -> None:
    gpu = GPUInfo("amd", "AMD GPU 0x15bf", 16 * GiB, 15 * GiB, None)
    hw = HardwareInfo(CPUInfo("x", "x86_64", 8, 16, ["AVX2"]), 32 * GiB, 30 * GiB, [gpu], True)
    r = default_rates(hw, None)
    assert r.gpu is not None and r.gpu.bandwidth_gbs > 0 and "assumed" in r.gpu.source


def test_roofline_calibration_transfers_across_models() -> None:
    """Calibrating on a compute-bound model scales both roofs, so a bandwidth-bound model is still
    predicted right; one fitted effective bandwidth would not be."""
    base = DeviceRates("cpu", 20.0, 0.5, 0.001, 100e9, decode_flops=50e9)  # 10 GB/s, 50 GFLOP/s roofs

    def true_tps(b: float, f: float) -> float:  # the machine is 0.8x the base rates, t0 1 ms
        return 1 / (max(b / 8e9, f / 40e9) + 0.001)

    a = [(250e6, 2.5e9), (250e6, 2.5e9), (270e6, 2.6e9)]  # compute-bound model (10 FLOP/byte), two depths
    samples = [DecodeSample(b, true_tps(b, f), f) for b, f in a]
    prefill = [PrefillSample(2e8, 500.0)]
    cal = calibration.calibrate("k", "cpu", samples, prefill, 0.001, base=base)
    rates = calibration.apply(base, cal)
    b2, f2 = 140e6, 60e6  # bandwidth-bound model (F32-like: few FLOPs per byte)
    predicted = 1 / (max(b2 / rates.effective_bandwidth, f2 / rates.decode_flops) + rates.t0_s)
    assert predicted == pytest.approx(true_tps(b2, f2), rel=0.02)
    single = calibration.apply(base, calibration.calibrate("k", "cpu", samples, prefill, 0.001))
    one_roof = 1 / (b2 / single.effective_bandwidth + single.t0_s)
    assert abs(one_roof / true_tps(b2, f2) - 1) > 0.2  # the folded bandwidth misjudges it
