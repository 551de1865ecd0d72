"""Measured GPU devices: the probe's line parsed, cached per machine and device and llama.cpp version, and the
speed model's GPU rates taken from the measurement (and saying so) instead of the specification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.bench.zoo import kernel_probe, write_zoo_model
from app.core.gguf.info import inspect_gguf
from app.core.predict import device_bandwidth as db
from app.core.predict.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo
from app.core.predict.memory import MemoryConfig
from app.core.predict.rates import ETA_GPU, GPU_NODES_PER_LAYER, T0_GPU, default_rates
from app.core.predict.speed import predict, weight_groups

LINE = {
    "device": "Vulkan0", "description": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "gpu", "backend": "Vulkan",
    "llama_cpp_version": "0.3.36", "read_gbs": 8.0, "matvec_gbs": {"F16": 8.0, "Q8_0": 4.0},
    "copy_gbs": 5.5, "gemm_gflops": 50.0, "node_us": 40.0, "matrix_bytes": 256 << 20, "seconds": 7.5,
}


def measured(**changes: object) -> db.DeviceBandwidth:
    result = db.parse(json.dumps({**LINE, **changes}), machine_key="m1")
    return result


def hardware(gpus: list[GPUInfo] | None = None, offload: bool | None = True) -> HardwareInfo:
    return HardwareInfo(CPUInfo("Test CPU", "x86_64", 2, 2), 16 * GiB, 8 * GiB, gpus or [], offload)


# ----------------------------------------------------------------------------- parsing


def test_the_probes_line_is_parsed_and_stamped() -> None:
    r = measured()
    assert (r.device, r.read_gbs, r.matvec_gbs, r.copy_gbs, r.gemm_gflops) == ("Vulkan0", 8.0,
                                                                             {"F16": 8.0, "Q8_0": 4.0}, 5.5, 50.0)
    assert r.machine_key == "m1" and r.measured_at.startswith("20") and not r.cached
    assert r.key == "m1|Vulkan0|llvmpipe (LLVM 15.0.6, 256 bits)|0.3.36"


@pytest.mark.parametrize(("line", "message"), [
    ('{"error": "no ggml device called \'Vulkan0\' (devices: CPU)"}', "no ggml device"),
    ('{"device": "Vulkan0"}', "lacks"),
    (json.dumps({**LINE, "read_gbs": 0.0}), "no bandwidth"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({k: v for k, v in LINE.items() if k != "backend"}), "incomplete"),
    ("{not json", "Expecting"),
])
def test_an_error_or_damaged_line_is_refused(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        db.parse(line)


# ----------------------------------------------------------------------------- cache


def test_cache_is_per_machine_device_and_llama_cpp_version() -> None:
    db.store(measured())
    db.store(measured(device="Vulkan1", description="AMD Radeon RX 7900 XTX", read_gbs=800.0))
    db.store(measured(llama_cpp_version="0.3.37", read_gbs=9.0))
    other = measured(read_gbs=99.0)
    other.machine_key = "m2"
    db.store(other)
    mine = db.cached_devices("m1", "0.3.36")
    assert sorted((r.device, r.read_gbs) for r in mine) == [("Vulkan0", 8.0), ("Vulkan1", 800.0)]
    assert all(r.cached for r in mine)
    assert [r.read_gbs for r in db.cached_devices("m1", "0.3.37")] == [9.0]
    assert db.load_cached("m1", "Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "0.3.36") is not None
    assert db.load_cached("m1", "Vulkan0", "another driver's name", "0.3.36") is None


def test_get_measures_once_then_reads_the_cache() -> None:
    calls: list[str] = []

    def measure(device: str) -> db.DeviceBandwidth:
        calls.append(device)
        return db.parse(json.dumps({**LINE, "device": device}))

    first = db.get_device_bandwidth("m1", "Vulkan0", LINE["description"], "0.3.36", measure)  # type: ignore[arg-type]
    again = db.get_device_bandwidth("m1", "Vulkan0", LINE["description"], "0.3.36", measure)  # type: ignore[arg-type]
    assert calls == ["Vulkan0"] and not first.cached and again.cached and again.read_gbs == first.read_gbs
    assert first.machine_key == "m1"
    db.get_device_bandwidth("m1", "Vulkan0", LINE["description"], "0.3.36", measure, remeasure=True)  # type: ignore[arg-type]
    assert calls == ["Vulkan0", "Vulkan0"]


def test_a_damaged_cache_is_no_measurement(roofline_home: Path) -> None:
    db.store(measured())
    db._cache_path().write_text("{not json")
    assert db.cached_devices("m1", "0.3.36") == []
    db._cache_path().write_text(json.dumps({"x": {"device": "Vulkan0"}, "y": [1]}))
    assert db.cached_devices("m1", "0.3.36") == []


def test_the_gpu_named_by_the_driver_wins_else_the_fastest_offload_device() -> None:
    db.store(measured())
    db.store(measured(device="CUDA0", description="NVIDIA GeForce RTX 4090", read_gbs=900.0))
    db.store(measured(device="CPU", description="AMD EPYC", type="cpu", read_gbs=2000.0))
    version = "0.3.36"
    assert db.measured_gpu("m1", "NVIDIA GeForce RTX 4090", version).device == "CUDA0"  # type: ignore[union-attr]
    assert db.measured_gpu("m1", "llvmpipe", version).device == "Vulkan0"  # type: ignore[union-attr]
    assert db.measured_gpu("m1", None, version).device == "CUDA0"  # type: ignore[union-attr]  # never the CPU
    assert db.measured_gpu("m2", None, version) is None


# ----------------------------------------------------------------------------- the speed model


def test_rates_prefer_the_measured_device_and_say_so() -> None:
    gpu = GPUInfo("nvidia", "RTX 4090", 24 * GiB, 23 * GiB, 1008.0, "8.9")
    spec = default_rates(hardware([gpu])).gpu
    assert spec is not None and spec.bandwidth_gbs == 1008.0 and spec.efficiency == ETA_GPU
    assert "spec (theoretical)" in spec.source
    m = measured(device="CUDA0", description="NVIDIA GeForce RTX 4090", read_gbs=870.0,
                 matvec_gbs={"F16": 870.0, "Q4_K": 700.0}, gemm_gflops=80000.0)
    g = default_rates(hardware([gpu]), device=m).gpu
    assert g is not None and g.bandwidth_gbs == 870.0 and g.efficiency == 1.0
    assert g.source.startswith("measured: CUDA0 (NVIDIA GeForce RTX 4090)")
    assert g.prefill_flops == 80000.0e9
    assert g.decode_rate("Q4_K") == pytest.approx(700.0e9 / (144 / 256))  # weights/s from its bytes/s
    assert g.decode_rate("F16") == pytest.approx(870.0e9 / 2)
    assert g.t_layer_s == pytest.approx(40e-6 * GPU_NODES_PER_LAYER)


def test_rates_find_the_cached_measurement_of_this_machine() -> None:
    hw = hardware()  # no GPU known to NVML or sysfs: a Vulkan device only llama.cpp sees
    assert default_rates(hw).gpu is None
    m = measured()
    m.machine_key = hw.machine_key
    m.llama_cpp_version = db.installed_llama_version()
    db.store(m)
    g = default_rates(hw).gpu
    assert g is not None and g.bandwidth_gbs == 8.0 and "llvmpipe" in g.source
    assert default_rates(hardware(offload=False)).gpu is None  # a CPU-only build offloads nothing


def test_full_offload_decode_follows_from_the_measured_matrix_vector_figures(tmp_path: Path) -> None:
    info = inspect_gguf(write_zoo_model(kernel_probe(2), "Q8_0", tmp_path / "k.gguf"))
    m = measured(matvec_gbs={"Q8_0": 4.0, "F16": 8.0}, read_gbs=8.0)
    rates = default_rates(hardware(), device=m)
    cfg = MemoryConfig(n_gpu_layers=99, n_ctx=512)
    groups = weight_groups(info, cfg)["gpu"]
    assert set(groups) >= {"Q8_0"} and not weight_groups(info, cfg)["cpu"]
    # each type's weights at that type's own matrix-vector rate; F32 norms (not measured) at the best figure
    expected = sum(g.bytes / (m.matvec_gbs.get(t, m.read_gbs) * 1e9) for t, g in groups.items()) + T0_GPU
    expected += info.n_layers * GPU_NODES_PER_LAYER * m.node_us * 1e-6  # every layer's nodes, each its cost
    p = predict(info, rates, cfg, depth=0, n_gen=1)
    assert p.decode_s_per_token == pytest.approx(expected, rel=1e-3)
    # twice the Q8_0 figure: the Q8_0 weights' share of the time halves
    faster = predict(info, default_rates(hardware(), device=measured(matvec_gbs={"Q8_0": 8.0}, read_gbs=8.0)),
                     cfg, depth=0, n_gen=1)
    assert faster.decode_s_per_token < p.decode_s_per_token * 0.6
