"""What this machine has for running models: CPU, RAM, GPUs (probed in app.core.predict.gpu_probes) and their
memory bandwidth.

Every probe is best-effort and fast (well under a second): a missing tool, library or file gives
"unknown" (None), never an exception. Each probe takes its data source as a parameter (the NVML module,
a sysctl function, the sysfs root, /proc/cpuinfo text) so tests can replay recorded data from machines
we do not have. llama_cpp is not imported here: whether the installed llama.cpp can offload to a GPU
is passed in by the caller (from the engine's `Ready.gpu_offload`).
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core.predict.machine_identity import machine_key
from app.core.predict.threads import live_cpu_counts

GiB = 1024**3

# ISA features llama.cpp's CPU kernels use; names as shown to the user.
X86_FLAGS = {  # /proc/cpuinfo flag -> feature
    "avx2": "AVX2", "avx512f": "AVX512F", "avx512_vnni": "AVX512_VNNI", "avx_vnni": "AVX_VNNI",
    "amx_tile": "AMX", "f16c": "F16C", "fma": "FMA", "avx512_bf16": "AVX512_BF16",
}
ARM_FLAGS = {"asimd": "NEON", "sve": "SVE", "asimddp": "DOTPROD", "i8mm": "I8MM"}
ALL_FEATURES = ["AVX2", "AVX512F", "AVX512_VNNI", "AVX_VNNI", "AMX", "F16C", "FMA", "NEON", "SVE", "DOTPROD", "I8MM"]


@dataclass
class CPUInfo:
    model: str = "unknown"
    arch: str = "unknown"
    physical_cores: int | None = None
    logical_cores: int | None = None
    features: list[str] = field(default_factory=list)  # of ALL_FEATURES, present ones
    usable_cpus: int | None = None  # the process's CPU affinity: fewer than logical_cores in a container


@dataclass
class GPUInfo:
    vendor: str  # nvidia | apple | amd
    name: str
    memory_total: int | None  # bytes usable by the GPU (Apple: the share of unified memory)
    memory_free: int | None
    bandwidth_gbs: float | None  # theoretical peak
    compute_capability: str | None = None
    unified_memory: bool = False
    index: int = 0
    source: str = ""  # where the facts came from (nvml, sysctl, sysfs, llama.cpp)
    device: str = ""  # llama.cpp's name for it ("CUDA0", "Vulkan0") when llama.cpp reported it
    backend: str = ""  # llama.cpp's backend for it ("CUDA", "Vulkan", "Metal") when llama.cpp reported it
    max_matrix_bytes: int = 0  # the largest weight matrix it multiplies (LlamaDevice's); 0: no limit or unknown


@dataclass
class LlamaDevice:
    """A device as the installed llama.cpp reports it (the engine asks ggml; see app/engine/llama/devices.py)."""

    name: str  # llama.cpp's device name: "CPU", "CUDA0", "Vulkan0", "Metal"
    description: str  # the driver's name for it: "NVIDIA GeForce RTX 4090", "llvmpipe (LLVM 15.0.6, 256 bits)"
    type: str  # cpu | gpu | igpu | accel
    backend: str  # the ggml backend it belongs to: "CPU", "CUDA", "Vulkan", "Metal"
    memory_total: int  # bytes, as the backend reports them
    memory_free: int
    max_matrix_bytes: int = 0  # the largest weight matrix it multiplies (a Vulkan device's limit); 0: no limit

    @property
    def offloads(self) -> bool:
        """A device llama.cpp offloads layers to (a GPU, dedicated or integrated)."""
        return self.type in ("gpu", "igpu")


@dataclass
class HardwareInfo:
    cpu: CPUInfo
    ram_total: int | None
    ram_available: int | None
    gpus: list[GPUInfo]
    gpu_offload: bool | None  # can the installed llama.cpp offload? None: unknown
    os: str = ""
    llama_devices: list[LlamaDevice] | None = None  # what the installed llama.cpp sees; None: not asked

    @property
    def machine_key(self) -> str:
        return machine_key(self.cpu, self.ram_total)

    @property
    def offload_gpus(self) -> list[GPUInfo]:
        """The GPUs a load can offload to. When llama.cpp was asked, exactly the devices it sees (a Vulkan-only
        Intel GPU included, a GPU the build cannot use or an environment variable hides left out), each with the
        driver's facts (bandwidth, compute capability) where a probed GPU has the same name; otherwise the GPUs
        the drivers report."""
        if self.llama_devices is None:
            return self.gpus
        out: list[GPUInfo] = []
        for d in (d for d in self.llama_devices if d.offloads):
            match = next((g for g in self.gpus if g.name and d.description
                          and (g.name in d.description or d.description in g.name)), None)
            out.append(GPUInfo(
                vendor=match.vendor if match else d.backend.lower(), name=d.description or d.name,
                memory_total=d.memory_total or (match.memory_total if match else None),
                memory_free=d.memory_free if d.memory_total else (match.memory_free if match else None),
                bandwidth_gbs=match.bandwidth_gbs if match else None,
                compute_capability=match.compute_capability if match else None,
                unified_memory=d.type == "igpu" or bool(match and match.unified_memory),
                index=len(out), source="llama.cpp", device=d.name, backend=d.backend,
                max_matrix_bytes=d.max_matrix_bytes,
            ))
        return out

    @property
    def best_gpu(self) -> GPUInfo | None:
        usable = [g for g in self.offload_gpus if g.memory_total]
        return max(usable, key=lambda g: g.memory_total or 0) if usable else None

    @property
    def hidden_gpus(self) -> list[GPUInfo]:
        """GPUs a driver reports that the installed llama.cpp does not see (none when llama.cpp was not asked)."""
        if self.llama_devices is None:
            return []
        seen = [g.name for g in self.offload_gpus]
        return [g for g in self.gpus if not any(g.name in s or s in g.name for s in seen)]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["machine_key"] = self.machine_key
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareInfo:
        return cls(
            cpu=CPUInfo(**data["cpu"]),
            ram_total=data.get("ram_total"),
            ram_available=data.get("ram_available"),
            gpus=[GPUInfo(**g) for g in data.get("gpus", [])],
            gpu_offload=data.get("gpu_offload"),
            os=data.get("os", ""),
            llama_devices=None if data.get("llama_devices") is None
            else [LlamaDevice(**d) for d in data["llama_devices"]],
        )


# ---------------------------------------------------------------------------------------- CPU


def parse_cpuinfo(text: str) -> tuple[str, list[str]]:
    """(model name, features) from Linux /proc/cpuinfo text (x86 or ARM)."""
    model = "unknown"
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and model == "unknown" and value.strip():
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    table = {**X86_FLAGS, **ARM_FLAGS}
    features = {name for flag, name in table.items() if flag in flags}
    if "amx_int8" in flags or "amx_bf16" in flags:
        features.add("AMX")
    return model, [f for f in ALL_FEATURES if f in features]


def probe_cpu(cpuinfo_text: str | None = None, sysctl: Callable[[str], str | None] | None = None) -> CPUInfo:
    info = CPUInfo(arch=platform.machine() or "unknown")
    info.physical_cores, info.logical_cores, info.usable_cpus = live_cpu_counts()
    if cpuinfo_text is None and Path("/proc/cpuinfo").exists():
        try:
            cpuinfo_text = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo_text = None
    if cpuinfo_text:
        info.model, info.features = parse_cpuinfo(cpuinfo_text)
    elif sysctl is not None or platform.system() == "Darwin":
        get = sysctl or run_sysctl
        info.model = get("machdep.cpu.brand_string") or "unknown"
        feats = []
        if info.arch == "arm64" or info.model.startswith("Apple"):
            feats.append("NEON")
            if get("hw.optional.arm.FEAT_DotProd") == "1":
                feats.append("DOTPROD")
            if get("hw.optional.arm.FEAT_I8MM") == "1":
                feats.append("I8MM")
        else:
            leaf7 = (get("machdep.cpu.leaf7_features") or "").split()
            base = (get("machdep.cpu.features") or "").split()
            for flag in ("AVX2", "AVX512F"):
                if flag in leaf7:
                    feats.append(flag)
            for flag in ("F16C", "FMA"):
                if flag in base:
                    feats.append(flag)
        info.features = [f for f in ALL_FEATURES if f in feats]
    elif platform.processor():
        info.model = platform.processor()
    return info


# ---------------------------------------------------------------------------------------- NVIDIA


# ---------------------------------------------------------------------------------------- Apple


def run_sysctl(name: str) -> str | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


# ---------------------------------------------------------------------------------------- AMD


# ---------------------------------------------------------------------------------------- all


def probe_memory() -> tuple[int | None, int | None]:
    try:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available)
    except Exception:  # noqa: BLE001 - a probe must never crash the app
        return None, None


GPU_BACKEND_LIBS = {"cuda": "cuda", "metal": "metal", "vulkan": "vulkan", "hip": "rocm", "sycl": "sycl",
                    "opencl": "opencl"}


def llama_cpp_gpu_backends(package_dir: Path | None = None) -> list[str] | None:
    """GPU backends the installed llama-cpp-python was built with, from its library files (without
    importing it: the app's core never loads llama.cpp). None: llama-cpp-python not found."""
    if package_dir is None:
        import importlib.util

        try:
            spec = importlib.util.find_spec("llama_cpp")
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin:
            return None
        package_dir = Path(spec.origin).parent
    names = " ".join(p.name.lower() for p in package_dir.rglob("*ggml*") if p.is_file())
    found = [label for key, label in GPU_BACKEND_LIBS.items() if f"ggml-{key}" in names]
    if "metal" not in found and (package_dir / "lib" / "default.metallib").exists():
        found.append("metal")
    return found


def probe_hardware(gpu_offload: bool | None = None, llama_devices: list[LlamaDevice] | None = None) -> HardwareInfo:
    """Everything, from the real machine. `gpu_offload`: from the engine's Ready event when known, else
    guessed from the llama.cpp libraries installed (a CUDA/Metal/Vulkan/ROCm backend present). `llama_devices`:
    the devices the engine reported (app.engine.device_query), None when not asked."""
    total, available = probe_memory()
    if gpu_offload is None:
        backends = llama_cpp_gpu_backends()
        gpu_offload = None if backends is None else bool(backends)
    from app.core.predict import gpu_probes  # here, not at the top: gpu_probes builds this module's GPUInfo

    gpus = gpu_probes.probe_gpus()
    return HardwareInfo(
        cpu=probe_cpu(), ram_total=total, ram_available=available, gpus=gpus, gpu_offload=gpu_offload,
        os=f"{platform.system()} {platform.release()}".strip(), llama_devices=llama_devices,
    )
