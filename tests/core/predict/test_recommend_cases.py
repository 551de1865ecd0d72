"""The recommender on recorded machines (an 8 GB RTX 3070 + 32 GB RAM, a 16 GB Apple M2, a CPU-only
laptop) with header-only Llama-3-8B-shaped GGUFs in several quantizations, and on the real default model.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from app.core.gguf.info import GGUFInfo, inspect_gguf
from app.core.predict.bandwidth import BandwidthResult
from app.core.predict.gpu_probes import probe_apple
from app.core.predict.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo
from app.core.predict.quality import quality
from app.core.predict.recommend import CPU, FULL, NONE, PARTIAL, Candidate, Machine, recommend
from app.core.predict.speed import default_rates
from big_gguf import write_header_only

QUANTS = ["Q2_K", "Q4_K_M", "Q8_0", "F16"]
BW = BandwidthResult(read_gbs=40.0, copy_gbs=30.0, threads=8, buffer_bytes=1 << 28, runs=5, seconds=1.0,
                     measured_at="recorded", gemm_gflops=400.0)
RYZEN = CPUInfo("AMD Ryzen 7 5800X", "x86_64", 8, 16, ["AVX2", "F16C", "FMA"])
RTX_3070 = GPUInfo("nvidia", "NVIDIA GeForce RTX 3070", 8 * GiB, 8 * GiB - 300 * 2**20, 448.0, "8.6")


def machine(hw: HardwareInfo) -> Machine:
    return Machine(hw, default_rates(hw, BW))


def desktop(ram_gib: int = 32, gpu: GPUInfo | None = RTX_3070, offload: bool = True) -> Machine:
    return machine(HardwareInfo(RYZEN, ram_gib * GiB, ram_gib * GiB - 2 * GiB, [gpu] if gpu else [], offload))


def mac16() -> Machine:
    facts = {"machdep.cpu.brand_string": "Apple M2", "hw.memsize": str(16 * GiB), "hw.physicalcpu": "8"}
    gpus = probe_apple(facts.get)
    return machine(HardwareInfo(CPUInfo("Apple M2", "arm64", 8, 8, ["NEON", "DOTPROD"]), 16 * GiB, 11 * GiB,
                                gpus, True))


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GGUFInfo]:
    d = tmp_path_factory.mktemp("l8b")
    return {q: inspect_gguf(write_header_only(d / f"{q}.gguf", q)) for q in QUANTS}


def by_name(rec, name):  # type: ignore[no-untyped-def]
    return next(v for v in rec.variants if v.name == name)


def test_rtx3070_verdicts(llama8b: dict[str, GGUFInfo]) -> None:
    rec = recommend(list(llama8b.values()), desktop(), n_ctx=8192)
    verdicts = {v.name: v.verdict for v in rec.variants}
    # 8B Q4_K_M (5.3 GB) + 1 GB KV fits an 8 GB card; Q8_0 (8.5 GB) and F16 (16 GB) cannot
    assert verdicts == {"Q2_K": FULL, "Q4_K_M": FULL, "Q8_0": PARTIAL, "F16": PARTIAL}
    q8, f16 = by_name(rec, "Q8_0"), by_name(rec, "F16")
    assert 0 < f16.n_gpu_layers < q8.n_gpu_layers < 33  # the bigger the file, the fewer layers on the GPU
    assert rec.pick is not None and rec.pick.name == "Q4_K_M"  # best quality that runs fully on the GPU
    assert rec.sentence.startswith("Q4_K_M: fits in your 8 GB GPU with 8k context; decode ≈ ")
    assert "limited by memory bandwidth" in rec.sentence
    # speed follows placement: full GPU >> partial, and bigger files are slower
    assert by_name(rec, "Q2_K").decode_tps > by_name(rec, "Q4_K_M").decode_tps > 3 * q8.decode_tps
    assert q8.decode_tps > f16.decode_tps
    assert all(v.speed_label == "uncalibrated" for v in rec.variants)


def test_bigger_context_fits_less(llama8b: dict[str, GGUFInfo]) -> None:
    infos = list(llama8b.values())
    small = recommend(infos, desktop(), n_ctx=4096)
    big = recommend(infos, desktop(), n_ctx=32768)
    q4_small, q4_big = by_name(small, "Q4_K_M"), by_name(big, "Q4_K_M")
    assert q4_small.verdict == FULL and q4_big.verdict == PARTIAL  # 32k f16 KV alone is 4 GB
    assert q4_big.memory is not None and q4_small.memory is not None
    assert q4_big.memory.kv_bytes == 8 * q4_small.memory.kv_bytes
    # a quantized KV cache brings it back onto the GPU
    assert by_name(recommend(infos, desktop(), n_ctx=32768, kv_type="q4_0"), "Q4_K_M").verdict == FULL
    # the largest context that fits grows as the KV cache shrinks
    mc = q4_small.max_ctx
    assert 8192 <= mc["f16"] < mc["q8_0"] < mc["q4_0"] <= 131072


def test_memory_decides(llama8b: dict[str, GGUFInfo]) -> None:
    infos = list(llama8b.values())
    cpu_box = recommend(infos, desktop(ram_gib=16, gpu=None), n_ctx=8192)
    verdicts = {v.name: v.verdict for v in cpu_box.variants}
    assert verdicts == {"Q2_K": CPU, "Q4_K_M": CPU, "Q8_0": CPU, "F16": NONE}  # 16 GB F16 > 16 GB RAM
    assert by_name(cpu_box, "F16").max_ctx == {"f16": 0, "q8_0": 0, "q4_0": 0}
    assert cpu_box.pick is not None and cpu_box.pick.verdict == CPU
    assert "runs from RAM on the CPU" in cpu_box.sentence
    big_box = recommend(infos, desktop(ram_gib=64, gpu=None), n_ctx=8192)
    assert by_name(big_box, "F16").verdict == CPU
    tiny = recommend(infos, desktop(ram_gib=4, gpu=None), n_ctx=8192)
    assert tiny.pick is None and all(v.verdict == NONE for v in tiny.variants)
    assert "None of these fits" in tiny.sentence


def test_cpu_only_build_ignores_the_gpu(llama8b: dict[str, GGUFInfo]) -> None:
    rec = recommend([llama8b["Q4_K_M"]], desktop(offload=False), n_ctx=8192)
    assert rec.variants[0].verdict == CPU and rec.variants[0].n_gpu_layers == 0
    assert any("cannot offload" in n for n in rec.budget.notes)
    assert any("for the OS and other apps" in n for n in rec.budget.notes)


def test_mac_unified_memory(llama8b: dict[str, GGUFInfo]) -> None:
    rec = recommend(list(llama8b.values()), mac16(), n_ctx=8192)
    verdicts = {v.name: v.verdict for v in rec.variants}
    assert verdicts["Q4_K_M"] == FULL and verdicts["F16"] == NONE  # no partial offload in one memory pool
    q4 = by_name(rec, "Q4_K_M")
    # M2: 100 GB/s; 5.3 GB per token at η 0.9 -> ~17 tok/s
    assert 12 < q4.decode_tps < 20
    assert rec.pick is not None and "Mac" in rec.sentence


def test_offload_curve_rises(llama8b: dict[str, GGUFInfo]) -> None:
    rec = recommend([llama8b["Q8_0"]], desktop(), n_ctx=8192)
    curve = rec.variants[0].curve
    assert [n for n, _ in curve] == list(range(34))
    speeds = [tps for _, tps in curve]
    assert speeds[-1] > 5 * speeds[0]  # all on a 448 GB/s GPU vs a 40 GB/s CPU
    assert all(b >= a * 0.999 for a, b in itertools.pairwise(speeds))


def test_quality_and_json(llama8b: dict[str, GGUFInfo]) -> None:
    rec = recommend([Candidate(llama8b["Q4_K_M"], name="q4", size=123)], desktop(), n_ctx=4096)
    data = json.loads(json.dumps(rec.to_dict()))
    v = data["variants"][0]
    assert v["size"] == 123 and v["quality"]["kld"] == pytest.approx(0.031)
    assert "Llama-3-8B" in v["quality"]["source"] and "varies by model" in v["quality"]["caveat"]
    assert v["kv_bytes"] == 4096 * 32 * 2 * 8 * 128 * 2  # layers x K,V x kv heads x head dim x f16
    assert v["bytes_gpu"] == v["memory"]["gpu"]["total"] > 0 and v["bytes_cpu"] > 0
    assert quality("Q8_0").kld is not None and quality("Q2_K").kld is not None
    assert quality("Q8_0").kld < quality("Q4_K_M").kld < quality("Q2_K").kld  # type: ignore[operator]


def test_calibrated_label(llama8b: dict[str, GGUFInfo]) -> None:
    from app.core.predict import calibration

    m = desktop(gpu=None)
    cal = calibration.Calibration(m.hw.machine_key, "cpu", effective_bandwidth_gbs=20.0, t0_s=0.002,
                                  t0_fitted=True, prefill_gflops=150.0, n_decode_samples=4, n_prefill_samples=3,
                                  n_threads=m.rates.cpu.threads)
    calibration.store(cal)
    rates = calibration.calibrated_rates(m.rates, m.hw.machine_key)
    rec = recommend([llama8b["Q4_K_M"]], Machine(m.hw, rates), n_ctx=4096)
    v = rec.variants[0]
    assert v.speed_label == "calibrated" and "(calibrated)" in rec.sentence
    # the calibrated bandwidth and t0; attention over the reply's own tokens (tg128: 64 on average) adds ~0.2 %
    assert v.decode_tps == pytest.approx(1 / (v.speed.bytes_per_token / 20e9 + 0.002), rel=0.01)  # type: ignore[union-attr]


@pytest.mark.model
def test_default_model_on_this_machine(default_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["recommend", "--json", "--ctx", "4096"]) == 0
    data = json.loads(capsys.readouterr().out)
    (v,) = data["variants"]
    assert v["file_type"] == "Q4_K_M" and v["verdict"] in (CPU, FULL, PARTIAL)
    assert v["kv_bytes"] == 72 * 2**20  # reference.md: 72.0 MiB at 4096 f16
    assert v["max_ctx"]["f16"] == 32768  # the trained context fits easily
    assert data["pick"] == "Q4_K_M" and data["sentence"].startswith("Q4_K_M: ")
    assert main(["recommend"]) == 0
    out = capsys.readouterr().out
    assert "★" in out and "for the OS and other apps" in out


def test_hardware_roundtrip_keeps_recommendation(llama8b: dict[str, GGUFInfo]) -> None:
    """A machine saved as JSON (how recorded machines are kept) recommends the same."""
    m = desktop()
    again = Machine(HardwareInfo.from_dict(json.loads(json.dumps(m.hw.to_dict()))), m.rates)
    a = recommend([llama8b["Q8_0"]], m, n_ctx=8192).variants[0]
    b = recommend([llama8b["Q8_0"]], again, n_ctx=8192).variants[0]
    assert dataclasses.astuple(a.quality) == dataclasses.astuple(b.quality)
    assert (a.verdict, a.n_gpu_layers, a.max_ctx) == (b.verdict, b.n_gpu_layers, b.max_ctx)


def test_text_report_with_gpu(llama8b: dict[str, GGUFInfo], capsys: pytest.CaptureFixture[str]) -> None:
    from app.commands.recommend import print_report

    print_report(recommend(list(llama8b.values()), desktop(), n_ctx=8192))
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("Q4_K_M: fits in your 8 GB GPU")
    assert "★ Q4_K_M" in out and "partial GPU" in out and "what-if decode tok/s by n_gpu_layers: 0:" in out
    assert "uncalibrated" in out and "Llama-3-8B" in out


def test_non_text_model_is_not_recommended(tmp_path: Path, llama8b: dict[str, GGUFInfo]) -> None:
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(tmp_path / "mmproj.gguf"), "clip")
    w.add_tensor("v.patch_embd.weight", np.zeros((64, 48), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    clip = inspect_gguf(tmp_path / "mmproj.gguf")
    rec = recommend([clip, llama8b["Q4_K_M"]], desktop(gpu=None), n_ctx=4096)
    assert rec.variants[0].verdict == "not a text model" and rec.pick is rec.variants[1]


def test_a_slow_machine_does_not_get_the_worst_quality_by_default() -> None:
    """When every variant is slow, demanding all of the fastest one's speed would always pick Q2_K."""
    from app.core.predict.recommend import VariantReport, choose

    def report(name: str, tps: float) -> VariantReport:
        return VariantReport(name=name, file_type=name, size=1, verdict=CPU, n_layers=32, n_gpu_layers=0,
                             n_ctx=4096, max_ctx={}, prefill_tps=1.0, decode_tps=tps, speed_label="",
                             decode_bound="memory bandwidth", quality=quality(name), memory=None, speed=None)

    slow = [report("Q2_K", 4.0), report("Q3_K_M", 3.4), report("Q4_K_M", 2.7), report("Q8_0", 1.6)]
    pick = choose(slow)
    assert pick is not None and pick.name == "Q3_K_M"
    # On a fast machine the floor is half the fastest: Q8_0 at 55 of 100 tok/s is fast enough and best.
    fast = [report("Q2_K", 100.0), report("Q4_K_M", 70.0), report("Q8_0", 55.0)]
    assert choose(fast).name == "Q8_0"  # type: ignore[union-attr]
    # ... and one just below half is not.
    assert choose([report("Q2_K", 100.0), report("Q4_K_M", 70.0), report("Q8_0", 45.0)]).name == "Q4_K_M"  # type: ignore[union-attr]
