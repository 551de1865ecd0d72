"""Hardware probes with recorded data from machines we do not have (NVIDIA via a stand-in NVML module,
Apple sysctl strings, an AMD sysfs tree), the real machine, and the bandwidth probe with its cache."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.core.predict import bandwidth, hardware
from app.core.predict.gpu_probes import probe_amd, probe_apple, probe_nvidia
from app.core.predict.hardware import GiB, parse_cpuinfo, probe_cpu

# ----------------------------------------------------------------------------- NVIDIA (recorded NVML)


class NVMLError(Exception):
    pass


def fake_nvml(devices: list[dict[str, Any]], init_fails: bool = False) -> SimpleNamespace:
    """A stand-in for the pynvml module returning recorded values (nvidia-smi -q of the real cards)."""

    def get(i: int, key: str) -> Any:
        value = devices[i][key]
        if isinstance(value, Exception):
            raise value
        return value

    def init() -> None:
        if init_fails:
            raise NVMLError("NVML Shared Library Not Found")

    return SimpleNamespace(
        NVML_CLOCK_MEM=2,
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: get(h, "name"),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=get(h, "total"), free=get(h, "free"),
                                                          used=get(h, "total") - get(h, "free")),
        nvmlDeviceGetMaxClockInfo=lambda h, kind: get(h, "mem_clock") if kind == 2 else 3105,
        nvmlDeviceGetMemoryBusWidth=lambda h: get(h, "bus"),
        nvmlDeviceGetCudaComputeCapability=lambda h: get(h, "cc"),
    )


RTX_4090 = {"name": "NVIDIA GeForce RTX 4090", "total": 25757220864, "free": 25200000000, "mem_clock": 10501,
            "bus": 384, "cc": (8, 9)}
RTX_3070 = {"name": b"NVIDIA GeForce RTX 3070", "total": 8589934592, "free": 8000000000, "mem_clock": 7001,
            "bus": 256, "cc": (8, 6)}


def test_nvidia_4090_bandwidth() -> None:
    (gpu,) = probe_nvidia(fake_nvml([RTX_4090]))
    assert gpu.name == "NVIDIA GeForce RTX 4090" and gpu.vendor == "nvidia"
    assert gpu.bandwidth_gbs == pytest.approx(1008, abs=1)  # NVIDIA's spec sheet: 1008 GB/s
    assert gpu.memory_total == 25757220864 and gpu.memory_free == 25200000000
    assert gpu.compute_capability == "8.9" and not gpu.unified_memory


def test_nvidia_two_gpus_and_partial_failure() -> None:
    broken = dict(RTX_3070, bus=NVMLError("Not Supported"))
    gpus = probe_nvidia(fake_nvml([RTX_4090, broken]))
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[1].name == "NVIDIA GeForce RTX 3070"  # bytes names decoded
    assert gpus[1].bandwidth_gbs is None and gpus[1].memory_total == 8589934592  # unknown, not a crash
    (ok,) = probe_nvidia(fake_nvml([RTX_3070]))
    assert ok.bandwidth_gbs == pytest.approx(448, abs=1)  # RTX 3070 spec: 448 GB/s


def test_nvidia_no_driver() -> None:
    assert probe_nvidia(fake_nvml([RTX_4090], init_fails=True)) == []


# ----------------------------------------------------------------------------- Apple (recorded sysctl)


def sysctl_from(values: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda name: values.get(name)


M2_PRO_16 = {"machdep.cpu.brand_string": "Apple M2 Pro", "hw.memsize": "17179869184", "hw.physicalcpu": "10",
             "hw.ncpu": "10", "hw.optional.arm.FEAT_DotProd": "1"}
M3_MAX_14 = {"machdep.cpu.brand_string": "Apple M3 Max", "hw.memsize": "38654705664", "hw.physicalcpu": "14"}
INTEL_MAC = {"machdep.cpu.brand_string": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", "hw.memsize": "17179869184",
             "machdep.cpu.features": "FPU VME SSE SSE2 FMA F16C AVX1.0", "machdep.cpu.leaf7_features": "AVX2 BMI2"}


def test_apple_silicon() -> None:
    (gpu,) = probe_apple(sysctl_from(M2_PRO_16))
    assert gpu.name == "Apple M2 Pro GPU" and gpu.unified_memory
    assert gpu.bandwidth_gbs == 200  # Apple: M2 Pro 200 GB/s
    assert gpu.memory_total is not None and 10 * GiB < gpu.memory_total < 12 * GiB  # ~2/3 of 16 GiB
    (binned,) = probe_apple(sysctl_from(M3_MAX_14))
    assert binned.bandwidth_gbs == 300  # the 14-core M3 Max has the narrower bus
    assert probe_apple(sysctl_from(INTEL_MAC)) == []


def test_mac_cpu_features(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware.platform, "machine", lambda: "arm64")
    cpu = probe_cpu(cpuinfo_text="", sysctl=sysctl_from(M2_PRO_16))
    assert cpu.model == "Apple M2 Pro" and cpu.features == ["NEON", "DOTPROD"]
    monkeypatch.setattr(hardware.platform, "machine", lambda: "x86_64")
    intel = probe_cpu(cpuinfo_text="", sysctl=sysctl_from(INTEL_MAC))
    assert intel.features == ["AVX2", "F16C", "FMA"]


# ----------------------------------------------------------------------------- AMD (recorded sysfs)


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")


def test_amd_sysfs(tmp_path: Path) -> None:
    _write_tree(tmp_path, {
        "card0/device/vendor": "0x1002",
        "card0/device/device": "0x744c",
        "card0/device/mem_info_vram_total": "25753026560",
        "card0/device/mem_info_vram_used": "1073741824",
        "card0-DP-1/status": "connected",  # a connector, not a card
        "card1/device/vendor": "0x8086",  # Intel iGPU: not ours
        "card1/device/device": "0x9a49",
        "card2/device/vendor": "0x1002",  # an APU: small carve-out, unknown device id
        "card2/device/device": "0x15bf",
        "card2/device/mem_info_vram_total": "536870912",
        "card2/device/mem_info_vram_used": "100000000",
    })
    gpus = probe_amd(tmp_path)
    assert len(gpus) == 2
    big, apu = gpus
    assert big.name == "Radeon RX 7900 XTX/XT" and big.bandwidth_gbs == 960
    assert big.memory_total == 25753026560 and big.memory_free == 25753026560 - 1073741824
    assert apu.bandwidth_gbs is None and apu.unified_memory and "0x15bf" in apu.name
    assert probe_amd(tmp_path / "missing") == []


# ----------------------------------------------------------------------------- CPU flags


XEON_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse sse2 avx f16c fma avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse sse2 avx f16c fma avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8
"""
GRAVITON_CPUINFO = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm asimddp sve i8mm
CPU implementer\t: 0x41
"""


def test_cpuinfo_flags() -> None:
    model, feats = parse_cpuinfo(XEON_CPUINFO)
    assert model == "Intel(R) Xeon(R) Platinum 8488C"
    assert feats == ["AVX2", "AVX512F", "AVX512_VNNI", "AMX", "F16C", "FMA"]
    _, arm = parse_cpuinfo(GRAVITON_CPUINFO)
    assert arm == ["NEON", "SVE", "DOTPROD", "I8MM"]  # i8mm: llama.cpp's repack kernels use it
    assert parse_cpuinfo("") == ("unknown", [])


def test_gpu_backend_detection(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libggml-cpu.so").write_bytes(b"")
    assert hardware.llama_cpp_gpu_backends(tmp_path) == []
    (tmp_path / "lib" / "libggml-cuda.so").write_bytes(b"")
    assert hardware.llama_cpp_gpu_backends(tmp_path) == ["cuda"]


# ----------------------------------------------------------------------------- this machine


@pytest.mark.live_probe
def test_real_machine_probe_is_fast_and_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fast by construction: probing reads what the OS reports and never measures (a measurement is what
    # takes seconds); a wall-clock limit would test this machine's load instead.
    def no_measuring(*args: object, **kwargs: object) -> None:
        raise AssertionError("probe_hardware ran a measurement")

    monkeypatch.setattr(bandwidth, "measure_bandwidth", no_measuring)
    monkeypatch.setattr(bandwidth, "measure_gemm", no_measuring)
    hw = hardware.probe_hardware(gpu_offload=False)
    assert hw.cpu.logical_cores and hw.cpu.logical_cores >= 1
    assert hw.ram_total and hw.ram_available and 0 < hw.ram_available <= hw.ram_total
    again = hardware.HardwareInfo.from_dict(json.loads(json.dumps(hw.to_dict())))
    assert again.machine_key == hw.machine_key and again == hw


@pytest.mark.live_probe
def test_bandwidth_measure_and_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bandwidth, "machine_busy", lambda: False)  # other tests may load the machine
    t = time.perf_counter()
    first = bandwidth.get_bandwidth("k1", budget_s=1.0)
    wall = time.perf_counter() - t
    assert not first.cached and first.read_gbs > 0 and first.copy_gbs > 0
    assert 0 < first.seconds <= wall  # its reported duration is its own, not more than the wall time around it
    assert first.buffer_bytes >= 256 << 20
    second = bandwidth.get_bandwidth("k1")
    assert second.cached and second.read_gbs == first.read_gbs
    assert not bandwidth.get_bandwidth("k2", budget_s=0.5).cached  # another machine: its own entry
    assert not bandwidth.get_bandwidth("k1", remeasure=True, budget_s=0.5).cached
    (bandwidth._cache_path()).write_text("{not json")
    assert not bandwidth.get_bandwidth("k1", budget_s=0.5).cached  # damaged cache: measured again


@pytest.mark.live_probe
def test_the_budget_ends_the_read_runs_whatever_the_machines_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is kept by counting runs, not by a wall-clock bound a busy machine would break: a spent budget
    stops after the two runs a best-of needs, an ample one runs up to max_runs."""
    monkeypatch.setattr(bandwidth, "measure_gemm", lambda *a, **k: 1.0)  # the GEMM probe is not under test here
    small = 64 << 20
    assert bandwidth.measure_bandwidth(threads=1, total_bytes=small, budget_s=0.0).runs == 2
    assert bandwidth.measure_bandwidth(threads=1, total_bytes=small, budget_s=3600.0, max_runs=4).runs == 4


@pytest.mark.live_probe
def test_hw_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli import main

    monkeypatch.setattr(bandwidth, "machine_busy", lambda: False)
    calls: list[int] = []
    measure = bandwidth.measure_bandwidth
    monkeypatch.setattr(bandwidth, "measure_bandwidth", lambda **kw: calls.append(1) or measure(**kw))
    assert main(["hw", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # Quick on every later start: the first run measures once, the next ones read the cached result.
    assert main(["hw", "--json"]) == 0 and len(calls) == 1
    assert json.loads(capsys.readouterr().out)["bandwidth"]["read_gbs"] == data["bandwidth"]["read_gbs"]
    assert data["bandwidth"]["read_gbs"] > 0 and data["cpu"]["logical_cores"] >= 1
    assert main(["hw"]) == 0
    out = capsys.readouterr().out
    assert "memory bandwidth" in out and "cached" in out


@pytest.mark.live_probe
def test_busy_measurement_is_retried_and_keeps_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bandwidth, "machine_busy", lambda: True)
    first = bandwidth.get_bandwidth("k", budget_s=0.3)
    assert first.busy
    # pretend the first run was badly disturbed: the next call measures again and keeps the better value
    bandwidth.store(dataclasses.replace(first, read_gbs=1000.0, cached=False))
    second = bandwidth.get_bandwidth("k", budget_s=0.3)
    assert not second.cached and second.read_gbs == 1000.0
    monkeypatch.setattr(bandwidth, "machine_busy", lambda: False)
    quiet = bandwidth.get_bandwidth("k", budget_s=0.3)
    assert not quiet.busy and quiet.read_gbs < 1000.0  # a quiet measurement replaces the busy ones
    assert bandwidth.get_bandwidth("k").cached
