"""The GPUs this machine has, each probed from its own source: NVIDIA through NVML, Apple Silicon through sysctl,
AMD through sysfs, with the memory bandwidth each vendor publishes. Best-effort like every probe of
app.core.predict.hardware (a missing library or file gives no GPU, never an exception), and each takes its data
source as a parameter so tests can replay machines we do not have."""

from __future__ import annotations

import functools
import platform
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from app.core.predict.hardware import GiB, GPUInfo, run_sysctl

# Apple Silicon: unified-memory bandwidth (GB/s, Apple's published figures). Variants with a cut-down
# memory bus (M3 Max 14-core CPU, M4 Max 14-core) are keyed with their CPU core count.
APPLE_BANDWIDTH = {
    "M1": 68.25, "M1 Pro": 200, "M1 Max": 400, "M1 Ultra": 800,
    "M2": 100, "M2 Pro": 200, "M2 Max": 400, "M2 Ultra": 800,
    "M3": 100, "M3 Pro": 150, "M3 Max": 400, "M3 Max/14": 300, "M3 Ultra": 819,
    "M4": 120, "M4 Pro": 273, "M4 Max": 546, "M4 Max/14": 410,
    "M5": 153,
}

# AMD GPUs by PCI device id: (name, bandwidth GB/s); sysfs does not expose the bus width.
AMD_GPUS = {
    0x744C: ("Radeon RX 7900 XTX/XT", 960.0), 0x7448: ("Radeon PRO W7900", 864.0),
    0x747E: ("Radeon RX 7800/7700 XT", 624.0), 0x7480: ("Radeon RX 7600", 288.0),
    0x73BF: ("Radeon RX 6800/6900 XT", 512.0), 0x73AF: ("Radeon RX 6900 XT", 512.0),
    0x73DF: ("Radeon RX 6700 XT", 384.0), 0x73FF: ("Radeon RX 6600/6650 XT", 256.0),
    0x740C: ("Instinct MI250X", 3277.0), 0x74A1: ("Instinct MI300X", 5300.0),
    0x7550: ("Radeon RX 9070 XT", 644.0),
}


def nvidia_bandwidth_gbs(max_mem_clock_mhz: float, bus_width_bits: int) -> float:
    """Theoretical bandwidth: double data rate × clock × bus width (RTX 4090: 10501 MHz, 384 bit -> 1008)."""
    return 2 * max_mem_clock_mhz * bus_width_bits / 8 / 1000


def probe_nvidia(nvml_module: ModuleType | Any | None = None) -> list[GPUInfo]:
    """NVIDIA GPUs through NVML (nvidia-ml-py; tests pass a recorded stand-in). No driver or GPU: []."""
    nvml: Any = nvml_module
    if nvml is None:
        try:
            import pynvml

            nvml = pynvml  # nvidia-ml-py
        except Exception:  # noqa: BLE001 - a probe must never crash the app
            return []
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - a probe must never crash the app
        return []
    gpus: list[GPUInfo] = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = _try(nvml.nvmlDeviceGetName, h) or "NVIDIA GPU"
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            mem = _try(nvml.nvmlDeviceGetMemoryInfo, h)
            clock = _try(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM)
            bus = _try(nvml.nvmlDeviceGetMemoryBusWidth, h)
            cc = _try(nvml.nvmlDeviceGetCudaComputeCapability, h)
            gpus.append(GPUInfo(
                vendor="nvidia", name=str(name),
                memory_total=int(mem.total) if mem is not None else None,
                memory_free=int(mem.free) if mem is not None else None,
                bandwidth_gbs=round(nvidia_bandwidth_gbs(clock, bus), 1) if clock and bus else None,
                compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
                index=i, source="nvml",
            ))
    except Exception:  # noqa: BLE001 - a driver error mid-way: keep the GPUs probed so far
        pass
    finally:
        _try(nvml.nvmlShutdown)
    return gpus


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a probe must never crash the app
        return None


def apple_chip(brand: str) -> str | None:
    m = re.search(r"Apple (M\d+)(?: (Pro|Max|Ultra))?", brand)
    if not m:
        return None
    return m.group(1) + (f" {m.group(2)}" if m.group(2) else "")


def apple_gpu_share(ram_total: int) -> int:
    """Memory Metal lets the GPU wire by default (recommendedMaxWorkingSetSize): about 2/3 of RAM up to
    36 GB, 3/4 above."""
    return ram_total * 2 // 3 if ram_total <= 36 * 10**9 else ram_total * 3 // 4


def probe_apple(sysctl: Callable[[str], str | None] | None = None) -> list[GPUInfo]:
    """Apple Silicon GPU (unified memory). Not a Mac: []."""
    if sysctl is None:
        if platform.system() != "Darwin":
            return []
        sysctl = run_sysctl
    brand = sysctl("machdep.cpu.brand_string") or ""
    chip = apple_chip(brand)
    if chip is None:
        return []
    mem = sysctl("hw.memsize")
    ram = int(mem) if mem and mem.isdigit() else None
    cores = sysctl("hw.physicalcpu") or sysctl("hw.ncpu")
    key = f"{chip}/{cores}" if f"{chip}/{cores}" in APPLE_BANDWIDTH else chip
    return [GPUInfo(
        vendor="apple", name=f"Apple {chip} GPU",
        memory_total=apple_gpu_share(ram) if ram else None, memory_free=None,
        bandwidth_gbs=APPLE_BANDWIDTH.get(key), unified_memory=True, source="sysctl",
    )]


def probe_amd(drm_root: Path = Path("/sys/class/drm")) -> list[GPUInfo]:
    """AMD GPUs from Linux sysfs (amdgpu driver): VRAM total/used; bandwidth from a device-id table."""
    gpus: list[GPUInfo] = []
    try:
        cards = sorted(p for p in drm_root.glob("card*") if re.fullmatch(r"card\d+", p.name))
    except OSError:
        return []
    for card in cards:
        dev = card / "device"
        vendor = _read(dev / "vendor")
        if vendor is None or int(vendor, 16) != 0x1002:
            continue
        total = _read_int(dev / "mem_info_vram_total")
        used = _read_int(dev / "mem_info_vram_used")
        device_id = _read(dev / "device")
        did = int(device_id, 16) if device_id else None
        name, bw = AMD_GPUS.get(did, (None, None)) if did is not None else (None, None)
        product = _read(dev / "product_name")
        gpus.append(GPUInfo(
            vendor="amd", name=product or name or (f"AMD GPU {device_id}" if device_id else "AMD GPU"),
            memory_total=total, memory_free=(total - used) if total is not None and used is not None else None,
            bandwidth_gbs=bw, index=len(gpus), source="sysfs",
            # small VRAM carve-out: an APU sharing system memory
            unified_memory=bool(total is not None and total <= 2 * GiB),
        ))
    return gpus


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except (OSError, ValueError):
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def probe_gpus() -> list[GPUInfo]:
    """Every GPU the drivers here report, whether or not llama.cpp can use it."""
    return probe_nvidia() + probe_apple() + (probe_amd() if platform.system() == "Linux" else [])


@functools.cache
def drivers_report_gpu() -> bool:
    """A GPU driver here reports a GPU: a load that then places no layer on a GPU is worth a warning. Asked once
    per process (a GPU does not come and go)."""
    return bool(probe_gpus())
