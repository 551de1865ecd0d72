"""Measured bandwidth and compute of llama.cpp's devices (a GPU's real roofs, not its clock x bus width).

The engine side's probe (`python -m app.engine.llama.device_probe`, run by `app.engine.device_probe_client`)
times, on the device through ggml, a large matrix-vector product per weight type (what one decode step does), a
device-to-device copy, an F16 matrix-matrix product (what a prompt batch does) and the cost of one small graph
node. This module keeps its results:
cached per machine and per device (name + description + llama.cpp version: a driver or build that changes the
kernels measures again) in `paths.cache_dir()` beside the CPU probe's cache, with the time of measurement, and
picks the one the speed model uses for a machine's GPU (`measured_gpu`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from app.core.config import paths
from app.core.files import atomic_write

CACHE_FILE = "device_bandwidth.json"
OFFLOAD_TYPES = ("gpu", "igpu")  # device types llama.cpp offloads layers to


@dataclass
class DeviceBandwidth:
    device: str  # llama.cpp's name: "CUDA0", "Vulkan0"
    description: str  # "NVIDIA GeForce RTX 4090", "llvmpipe (LLVM 15.0.6, 256 bits)"
    type: str  # cpu | gpu | igpu | accel
    backend: str
    llama_cpp_version: str
    read_gbs: float  # best matrix-vector read bandwidth over the weight types, GB/s
    matvec_gbs: dict[str, float] = field(default_factory=dict)  # ggml type -> GB/s of its weights
    copy_gbs: float = 0.0  # bytes read + written by a device copy, GB/s
    gemm_gflops: float = 0.0  # F16 x F32 matrix-matrix product
    node_us: float = 0.0  # one small graph node: dispatch + synchronisation (0: not measured)
    matrix_bytes: int = 0
    seconds: float = 0.0
    measured_at: str = ""
    machine_key: str = ""
    cached: bool = False

    @property
    def key(self) -> str:
        return cache_key(self.machine_key, self.device, self.description, self.llama_cpp_version)

    def label(self) -> str:
        """Where the figures come from, for a rates source line: "Vulkan0 (llvmpipe …) measured 2026-12-01"."""
        return f"{self.device} ({self.description}) measured {self.measured_at[:10]}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceBandwidth:
        known = cls.__dataclass_fields__
        result = cls(**{k: v for k, v in data.items() if k in known})
        result.matvec_gbs = {str(k): float(v) for k, v in dict(result.matvec_gbs or {}).items()}
        return result


def cache_key(machine_key: str, device: str, description: str, version: str) -> str:
    return f"{machine_key}|{device}|{description}|{version}"


def installed_llama_version() -> str:
    """llama-cpp-python's version as its package metadata says (core never imports llama_cpp); "" when absent."""
    try:
        return metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return ""


def parse(line: str, machine_key: str = "") -> DeviceBandwidth:
    """A probe's JSON line → DeviceBandwidth, stamped now. Raises ValueError on an error line or bad JSON."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("the probe's output is not a JSON object")
    if "error" in data:
        raise ValueError(str(data["error"]))
    for name in ("device", "description", "read_gbs", "matvec_gbs"):
        if name not in data:
            raise ValueError(f"the probe's output lacks {name!r}")
    try:
        result = DeviceBandwidth.from_dict(data)
    except (TypeError, AttributeError) as exc:  # a field missing or of the wrong kind
        raise ValueError(f"the probe's output is incomplete ({exc})") from exc
    if not result.read_gbs > 0:
        raise ValueError(f"the probe measured no bandwidth on {result.device}")
    result.measured_at = result.measured_at or datetime.now(UTC).isoformat(timespec="seconds")
    result.machine_key = machine_key
    return result


def _cache_path() -> Path:
    return paths.cache_dir() / CACHE_FILE


def _read_all() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}  # missing or damaged cache: measure again
    return data if isinstance(data, dict) else {}


def cached_devices(machine_key: str, version: str | None = None) -> list[DeviceBandwidth]:
    """Every device measured on this machine with this llama.cpp (default: the installed one)."""
    version = installed_llama_version() if version is None else version
    out = []
    for entry in _read_all().values():
        try:
            result = DeviceBandwidth.from_dict(entry)
        except (TypeError, ValueError, AttributeError):
            continue
        if result.machine_key == machine_key and result.llama_cpp_version == version and result.read_gbs > 0:
            result.cached = True
            out.append(result)
    return out


def load_cached(machine_key: str, device: str, description: str, version: str) -> DeviceBandwidth | None:
    key = cache_key(machine_key, device, description, version)
    return next((r for r in cached_devices(machine_key, version) if r.key == key), None)


def store(result: DeviceBandwidth) -> None:
    data = _read_all()
    entry = result.to_dict()
    entry.pop("cached", None)
    data[result.key] = entry
    atomic_write.write_json(_cache_path(), data)


def get_device_bandwidth(machine_key: str, device: str, description: str, version: str,
                         measure: Callable[[str], DeviceBandwidth], remeasure: bool = False) -> DeviceBandwidth:
    """The cached measurement of `device`, or a fresh one from `measure(device)` (stored) when missing or asked.
    `measure` raises when the device cannot be probed; nothing is stored then."""
    cached = None if remeasure else load_cached(machine_key, device, description, version)
    if cached is not None:
        return cached
    result = measure(device)
    result.machine_key = machine_key
    store(result)
    return result


def measured_gpu(machine_key: str, gpu_name: str | None = None,
                 version: str | None = None) -> DeviceBandwidth | None:
    """The measured device the speed model takes for this machine's GPU: the offload device whose description
    names `gpu_name` (NVML's or sysfs's name of the best GPU), else the fastest one measured; None when none is."""
    found = [r for r in cached_devices(machine_key, version) if r.type in OFFLOAD_TYPES]
    if not found:
        return None
    named = [r for r in found if gpu_name and gpu_name.lower() in r.description.lower()]
    return max(named or found, key=lambda r: r.read_gbs)
