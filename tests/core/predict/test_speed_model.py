"""Speed model: bytes per decode step, prefill FLOPs, rates, calibration fit and storage, and the
`roofline calibrate` command end to end through the engine on a tiny synthetic model."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from app.commands.calibrate import KERNEL_PROBES
from app.core.gguf.info import GGUFInfo, TensorInfo, inspect_gguf
from app.core.predict import calibration
from app.core.predict.calibration import Sample, fit_decode, fit_decode_with_types, fit_prefill
from app.core.predict.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo
from app.core.predict.memory import MemoryConfig
from app.core.predict.rates import ATTENTION_READ_SLOWDOWN
from app.core.predict.speed import (
    ETA_CPU,
    PREFILL_WIDTH,
    DeviceRates,
    Parts,
    Rates,
    cost_parts,
    decode_traffic,
    default_rates,
    offload_curve,
    predict,
    prefill_flops,
    weight_groups,
)
from synth_gguf import write_synthetic_gguf


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


def test_moe_prefill_reads_every_expert_but_computes_the_active_ones(tmp_path: Path) -> None:
    info = inspect_gguf(write_synthetic_gguf(tmp_path / "m.gguf", n_layers=2))
    exp = TensorInfo("blk.0.ffn_up_exps.weight", "F32", [256, 512, 8], 256 * 512 * 8, 256 * 512 * 8 * 4, 0)
    moe = dataclasses.replace(info, expert_count=8, expert_used_count=2, tensors=[*info.tensors, exp])
    g_dense = weight_groups(info, MemoryConfig(n_ctx=512), has_gpu=False)["cpu"]["F32"]
    g = weight_groups(moe, MemoryConfig(n_ctx=512), has_gpu=False)["cpu"]["F32"]
    assert g.bytes - g_dense.bytes == exp.n_bytes * 2 / 8  # a token reads its 2 experts
    assert g.elements - g_dense.elements == exp.n_elements * 2 / 8
    assert g.bytes_all - g_dense.bytes_all == exp.n_bytes  # a 512-token batch touches all 8


# ----------------------------------------------------------------------------- predictions


def _by_type(info: GGUFInfo) -> dict[str, tuple[float, float]]:
    """type -> (bytes, weights) a decode step reads and multiplies, straight from the tensor table (dense
    model; norms are read, not multiplied)."""
    out: dict[str, tuple[float, float]] = {}
    for t in info.tensors:
        if t.name.startswith("blk.") or t.name == "token_embd.weight":  # tied output
            b, e = out.get(t.ggml_type, (0.0, 0.0))
            out[t.ggml_type] = (b + t.n_bytes, e + (t.n_elements if len(t.shape) >= 2 else 0))
    return out


def test_prediction_formula_and_label(gemma: GGUFInfo) -> None:
    r = cpu_rates()
    p = predict(gemma, r, MemoryConfig(), depth=0, n_gen=1)
    assert p.decode_s_per_token == pytest.approx(p.bytes_per_token / (0.5 * 20e9) + 0.002)
    assert p.label == "uncalibrated" and p.decode_bound == "memory bandwidth"
    deeper = predict(gemma, r, MemoryConfig(), depth=4000, n_gen=1)
    assert deeper.decode_tps < p.decode_tps  # KV filled so far is read every token
    cal = Rates(dataclasses.replace(r.cpu, calibrated=True))
    assert predict(gemma, cal).label == "calibrated"


def test_decode_is_a_roofline_per_quantization_type(gemma: GGUFInfo) -> None:
    rates = {"Q8_0": 5e9, "Q4_K": 3e9, "Q6_K": 2e9, "Q5_0": 2.5e9}
    cpu = DeviceRates("cpu", 20.0, 0.5, 0.002, 100e9, decode_rates=rates, t_layer_s=50e-6)
    p = predict(gemma, Rates(cpu), MemoryConfig(), depth=0, n_gen=1)
    groups = _by_type(gemma)
    assert set(groups) == set(rates) | {"F32"}  # the norms (F32) are read, never multiplied
    alu_of = {t: (e / rates[t] if t in rates else 0.0) for t, (_, e) in groups.items()}
    expected = sum(max(b / 10e9, alu_of[t]) for t, (b, _) in groups.items()) + 18 * 50e-6 + 0.002
    assert p.decode_s_per_token == pytest.approx(expected)
    # the label compares the model's own two sums
    mem = sum(b for b, _ in groups.values()) / 10e9
    alu = sum(alu_of.values())
    assert p.decode_memory_s == pytest.approx(mem) and p.decode_compute_s == pytest.approx(alu)
    assert p.decode_bound == ("compute" if alu > mem else "memory bandwidth")
    fast_alu = dataclasses.replace(cpu, decode_rates={t: v * 100 for t, v in rates.items()})
    assert predict(gemma, Rates(fast_alu)).decode_bound == "memory bandwidth"
    slow_alu = dataclasses.replace(cpu, decode_rates={t: v / 100 for t, v in rates.items()})
    assert predict(gemma, Rates(slow_alu)).decode_bound == "compute"
    idle = DeviceRates("cpu", 1e6, 1.0, 1.0, 100e9)  # a 1 s overhead dwarfs everything
    assert predict(gemma, Rates(idle)).decode_bound == "per-token overhead"


def test_kv_cache_is_read_and_attended_at_its_type_rate(gemma: GGUFInfo) -> None:
    cpu = DeviceRates("cpu", 20.0, 0.5, 0.0, 100e9, decode_rates={"F16": 1e9, "*": 1e15})
    parts0 = cost_parts(gemma, Rates(cpu), MemoryConfig(), depth=0)["cpu"]
    parts = cost_parts(gemma, Rates(cpu), MemoryConfig(), depth=1000)["cpu"]
    kv_bytes = 18 * 2 * 256 * 2 * 1000  # 18 layers x (K + V) x 256 x f16 x 1000 cells
    heads = 4 * (256 + 256) * 1000 * 18  # every query head's products with K and V rows
    reads = ATTENTION_READ_SLOWDOWN * kv_bytes / 10e9  # strided pieces of K rows: slower than a weight's bytes
    assert parts.mem[-2:] == pytest.approx([reads, 0.0]) and parts.alu[-2:] == pytest.approx([0.0, heads / 1e9])
    assert parts.types[-2:] == ["F16", "F16"]  # a calibration's F16 scale reaches both
    # on the CPU the two are added: the products are too short to hide the reads
    assert parts.time() - parts0.time() == pytest.approx(reads + heads / 1e9)


def test_prefill_per_type_rates_and_reads_per_micro_batch(gemma: GGUFInfo) -> None:
    rates = {"Q8_0": 50e9, "Q4_K": 80e9, "Q6_K": 40e9, "Q5_0": 45e9, "F32": 10e9}
    cpu = DeviceRates("cpu", 20.0, 0.5, 0.001, 30e9, prefill_rates=rates, t_layer_s=10e-6)
    n = 512
    p = predict(gemma, Rates(cpu), MemoryConfig(n_ubatch=256, n_batch=512), n_prompt=n)
    groups = _by_type(gemma)
    out_el = 262144 * 640  # the tied output: logits for the last token only
    width = 640 / (640 + PREFILL_WIDTH)  # a narrow model's matmuls reach a smaller share of the kernels' rate
    t = 0.0
    for typ, (b, e) in groups.items():
        flops = 2 * (e - out_el) * n + 2 * out_el if typ == "Q8_0" else 2 * e * n
        t += max(2 * b / 10e9, flops / (rates[typ] * width))  # 2 micro-batches read the weights twice
    _, per_layer = prefill_flops(gemma, n)
    layer_weights = sum(e for _, e in groups.values()) - out_el
    attn = sum(per_layer) - 2 * n * layer_weights  # what prefill_flops adds for attention
    t += attn / 30e9 + 2 * (18 * 10e-6 + 0.001)
    assert n / p.prefill_tps == pytest.approx(t, rel=1e-6)
    slow_memory = DeviceRates("cpu", 0.5, 1.0, 0.001, 1e12, prefill_rates={"*": 1e13})
    assert predict(gemma, Rates(slow_memory), n_prompt=512).prefill_bound == "memory bandwidth"


def test_default_rates_from_hardware() -> None:
    gpu = GPUInfo("nvidia", "RTX 4090", 24 * GiB, 23 * GiB, 1008.0, "8.9")
    hw = HardwareInfo(CPUInfo("x", "x86_64", 8, 16, ["AVX2"]), 32 * GiB, 30 * GiB, [gpu], True)
    r = default_rates(hw, None)
    assert r.cpu.efficiency == ETA_CPU and not r.cpu.calibrated
    assert r.cpu.decode_rate("Q4_K") > 0 and r.cpu.prefill_rate("Q4_K") > 0
    assert r.cpu.decode_rate("IQ2_XXS") > 0  # a type without its own factor still has a roof
    assert r.gpu is not None and r.gpu.bandwidth_gbs == 1008.0 and 0.85 <= r.gpu.efficiency <= 0.95
    assert 0.003 <= r.gpu.t0_s <= 0.006  # published GPU overhead
    assert r.gpu.decode_rates == {}  # decode on a GPU: bandwidth-bound, no compute roof


def test_partial_offload_sums_devices(gemma: GGUFInfo) -> None:
    gpu = DeviceRates("gpu", 500.0, 0.9, 0.004, 50e12)
    rates = Rates(DeviceRates("cpu", 20.0, 0.65, 0.001, 100e9), gpu)
    curve = dict(offload_curve(gemma, rates))
    half = predict(gemma, rates, MemoryConfig(n_gpu_layers=10))
    by_dev = half.bytes_per_token_by_device
    expected = by_dev["cpu"] / (0.65 * 20e9) + by_dev["gpu"] / (0.9 * 500e9) + 0.004
    assert half.decode_s_per_token == pytest.approx(expected)
    assert curve[19] > curve[10] > curve[0]


def test_gpu_with_unknown_bandwidth_still_predicts() -> None:
    gpu = GPUInfo("amd", "AMD GPU 0x15bf", 16 * GiB, 15 * GiB, None)
    hw = HardwareInfo(CPUInfo("x", "x86_64", 8, 16, ["AVX2"]), 32 * GiB, 30 * GiB, [gpu], True)
    r = default_rates(hw, None)
    assert r.gpu is not None and r.gpu.bandwidth_gbs > 0 and "assumed" in r.gpu.source


# ----------------------------------------------------------------------------- calibration fit


def _samples(a: float, c: float, t0: float, tl: float = 0.0003, jitter: float = 0.0) -> list[Sample]:
    """Three model shapes, like `roofline calibrate`'s: one bound by memory (a 1B Q8_0: big cheap groups), one
    by its kernels (a 1B 4-bit), one by its per-layer overhead (a small model, more layers), the first at two
    depths. The truth is the model's own formula at known scales and overheads."""
    rng = random.Random(5)
    shapes = {"mem": [(Parts([0.030, 0.002], [0.012, 0.001], 0.0, 1.0, 16), 0),
                      (Parts([0.030, 0.004], [0.012, 0.002], 0.0, 1.0, 16), 1024)],
              "alu": [(Parts([0.018, 0.001], [0.030, 0.002], 0.0, 1.0, 16), 0)],
              "small": [(Parts([0.004, 0.001], [0.003, 0.001], 0.0, 1.0, 24), 0)]}
    out = []
    for model, parts_list in shapes.items():
        for parts, depth in parts_list:
            for _ in range(3):
                s = parts.time(a, c, t0, tl) * rng.uniform(1 - jitter, 1 + jitter)
                out.append(Sample("decode", 1 / s, 1, parts, model, depth))
    pre = Parts([0.02, 0.01], [0.3, 0.1], 0.05, 1.0, 24)
    out += [Sample("prefill", 512 / pre.time(a, 0.8, t0, tl), 512, pre, "mem")] * 2
    return out


def test_fit_recovers_scales_and_layer_overhead_from_two_shapes() -> None:
    a, c, t0, tl = 1.3, 0.7, 0.0005, 0.0003
    fa, fc, ft0, ftl, err = fit_decode(_samples(a, c, t0, tl), t0_default=t0)
    assert err < 0.01 and ft0 == t0
    assert fa == pytest.approx(a, rel=0.03) and fc == pytest.approx(c, rel=0.03)
    assert ftl == pytest.approx(tl, rel=0.05)
    p, own, perr = fit_prefill(_samples(a, c, t0, tl), fa, ft0, ftl)
    assert p == pytest.approx(0.8, rel=0.03) and perr < 0.01 and own == {}  # groups without types: one scale
    # noisy runs (±5 %): still close
    fa, fc, *_ = fit_decode(_samples(a, c, t0, tl, jitter=0.05), t0_default=t0)
    assert fa == pytest.approx(a, rel=0.15) and fc == pytest.approx(c, rel=0.15)
    with pytest.raises(ValueError):
        fit_decode([], 0.001)
    with pytest.raises(ValueError):
        fit_prefill([s for s in _samples(a, c, t0) if s.kind == "decode"], 1.0, 0.0)


def test_prefill_fit_gives_each_dominant_type_its_own_scale() -> None:
    """Three prompt runs: one mostly Q8_0, one mostly Q4_K, one a Q4_K/Q6_K mix; the truth scales Q8_0's
    kernels by 0.5 and Q4_K's by 1.2 (Q6_K's 0.9, never dominant): the fit finds the two dominant types'
    scales (relative to the common one) and predicts every run, the mix included."""
    truth = {"Q8_0": 0.5, "Q4_K": 1.2, "Q6_K": 0.9}
    runs = [Parts([0.01, 0.001], [0.40, 0.02], 0.02, 1.0, 16, ["Q8_0", "Q6_K"]),
            Parts([0.01, 0.001], [0.30, 0.03], 0.02, 1.0, 16, ["Q4_K", "Q6_K"]),
            Parts([0.01, 0.005], [0.20, 0.10], 0.03, 1.0, 24, ["Q4_K", "Q6_K"])]
    samples = [Sample("prefill", 256 / p.time(1.0, 1.0, 0.0005, 0.0003, truth), 256, p, f"m{i}", probe=i == 0)
               for i, p in enumerate(runs)]
    c, own, err = fit_prefill(samples, 1.0, 0.0005, 0.0003)
    assert set(own) == {"Q8_0", "Q4_K"} and err < 0.04  # Q6_K's 0.9 has no run of its own to show it
    assert c * own["Q8_0"] / (c * own["Q4_K"]) == pytest.approx(0.5 / 1.2, rel=0.1)
    # one common scale cannot explain both: the Q8_0 run and the Q4_K run would be off in opposite directions
    one = [p.time(1.0, c, 0.0005, 0.0003) / s.seconds - 1 for p, s in zip(runs, samples, strict=True)]
    assert max(one) - min(one) > 0.3


def test_decode_fit_gives_a_compute_bound_type_its_own_scale() -> None:
    """Decode runs: a memory-bound Q6_K model, a compute-bound Q4_K one (two depths), and a compute-bound
    Q8_0 probe whose kernel truly runs 1.6x what the Q4_K-set scale says: the type fit finds Q8_0's factor and
    leaves the memory-bound Q6_K at 1 (its kernel scale cannot be seen)."""
    truth = {"Q8_0": 1.6}
    a, c, t0, tl = 1.1, 0.6, 0.0005, 0.0001
    runs = [(Parts([0.060, 0.002], [0.020, 0.001], 0.0, 1.0, 16, ["Q6_K", "F16"]), "q6"),
            (Parts([0.030, 0.002], [0.060, 0.001], 0.0, 1.0, 16, ["Q4_K", "F16"]), "q4"),
            (Parts([0.030, 0.008], [0.060, 0.004], 0.0, 1.0, 16, ["Q4_K", "F16"]), "q4"),
            (Parts([0.030, 0.002], [0.090, 0.001], 0.0, 1.0, 4, ["Q8_0", "F16"]), "probe")]
    samples = [Sample("decode", 1 / p.time(a, c, t0, tl, truth), 1, p, m, probe=m == "probe")
               for p, m in runs for _ in range(2)]
    fa, fc, _, ftl, err, own = fit_decode_with_types(samples, t0)
    assert err < 0.02 and ftl == pytest.approx(tl, abs=3e-5) and fa == pytest.approx(a, rel=0.05)
    assert fc * own["Q8_0"] == pytest.approx(c * 1.6, rel=0.05) and own.get("Q6_K", 1.0) == 1.0
    # without the type fit the probe is off by far more than the target
    _, _, _, _, err_one = fit_decode(samples, t0)
    assert err_one > 0.05 and err_one > 5 * err


def test_calibrate_and_apply_scale_every_rate() -> None:
    base = DeviceRates("cpu", 20.0, 1.0, 0.0005, 50e9, decode_rates={"Q4_K": 4e9, "*": 1e9},
                       prefill_rates={"Q4_K": 100e9}, t_layer_s=40e-6,
                       batch_rates={"Q4_K": {2: (5e9, 100.0), 16: (9e9, 80.0)}})
    cal = calibration.calibrate("k", "cpu", _samples(1.3, 0.7, 0.0005), base)
    r = calibration.apply(base, cal)
    assert r.calibrated and r.effective_bandwidth == pytest.approx(1.3 * 20e9, rel=0.03)
    assert r.t0_s == cal.t0_s and r.t_layer_s == cal.t_layer_s == pytest.approx(0.0003, abs=0.00003)
    assert r.decode_rates["Q4_K"] == pytest.approx(4e9 * cal.decode_scale)
    assert r.decode_rates["*"] == pytest.approx(1e9 * cal.decode_scale)
    assert r.prefill_rates["Q4_K"] == pytest.approx(100e9 * cal.prefill_scale)
    cal.prefill_type_scales = {"Q4_K": 0.5}  # a type's own scale multiplies the common one
    cal.decode_type_scales = {"Q4_K": 2.0}
    own = calibration.apply(base, cal)
    assert own.prefill_rates["Q4_K"] == pytest.approx(50e9 * cal.prefill_scale)
    assert (own.decode_rates["Q4_K"] == pytest.approx(8e9 * cal.decode_scale)
            and own.decode_rates["*"] == r.decode_rates["*"])
    assert own.batch_rates["Q4_K"][2][0] == pytest.approx(10e9 * cal.decode_scale)
    assert r.prefill_flops == pytest.approx(50e9 * cal.prefill_scale)
    # a step of a few streams is a decode step: its kernels scale with the decode fit, the row costs stay
    assert r.batch_rates["Q4_K"] == {2: (pytest.approx(5e9 * cal.decode_scale), 100.0),
                                     16: (pytest.approx(9e9 * cal.decode_scale), 80.0)}
    assert cal.models == ["alu", "mem", "small"] and cal.n_decode_samples == 12 and cal.n_prefill_samples == 2


def test_calibration_storage(tmp_path: Path) -> None:
    base = DeviceRates("cpu", 20.0, 1.0, 0.0005, 50e9)
    cal = calibration.calibrate("m1", "cpu", _samples(1.0, 1.0, 0.001), base, n_threads=2)
    calibration.store(cal)
    calibration.store(dataclasses.replace(cal, backend="gpu", effective_bandwidth_gbs=500.0))
    assert calibration.load("m1", "cpu", 2) == cal
    assert calibration.load("m1", "gpu", 2).effective_bandwidth_gbs == 500.0  # type: ignore[union-attr]
    assert calibration.load("m2", "cpu", 2) is None
    assert calibration.load("m1", "cpu", 1) is None  # measured with two threads: not for one
    old = json.loads(calibration._path().read_text())
    old["m1/cpu/t2"].pop("version")  # an entry of the single-rate model: calibrate again
    calibration._path().write_text(json.dumps(old))
    assert calibration.load("m1", "cpu", 2) is None
    calibration._path().write_text("[1, 2")
    assert calibration.load("m1", "gpu", 2) is None  # damaged file: calibrate again


# ----------------------------------------------------------------------------- the command


@pytest.mark.model
@pytest.mark.timeout(900)  # a 1.2B zoo model is measured too: ~30 s on a quiet machine, minutes on a busy one
def test_calibrate_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main
    from app.core.predict.hardware import probe_hardware

    model = write_synthetic_gguf(tmp_path / "tiny.gguf", n_layers=2, n_ctx=2048)
    assert main(["calibrate", "-m", str(model), "--depth", "512", "--zoo", "1", "-r", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cal = out["calibration"]
    assert cal["backend"] == "cpu" and cal["n_decode_samples"] >= 3 and cal["prefill_gflops"] > 0
    # the given model, a zoo shape and the prompt-batch probes, written on the fly; each probe's type gets
    # its own prefill scale (its run does most of its compute in that type)
    assert len(cal["models"]) == 2 + len(KERNEL_PROBES)
    assert (set(KERNEL_PROBES) <= set(cal["prefill_type_scales"])
            and set(KERNEL_PROBES) <= set(cal["decode_type_scales"]))
    assert out["calibrated"]["label"] == "calibrated" and out["uncalibrated"]["label"] == "uncalibrated"
    stored = calibration.load(probe_hardware().machine_key, "cpu", cal["n_threads"])
    assert stored is not None and "tiny.gguf" in stored.models
