"""The compute devices llama.cpp sees in this process, as ggml reports them (`ggml_backend_dev_*`).

NVML, sysfs and sysctl (app.core.predict.hardware) know the GPUs a driver exposes; what matters for a load is
what *this build* of llama.cpp can use: a CPU-only build sees no GPU whatever the machine has, a Vulkan build sees
an Intel or AMD GPU that NVML never will, and llama.cpp's Vulkan backend leaves CPU-type devices (Mesa's llvmpipe)
out unless GGML_VK_VISIBLE_DEVICES names them. Each device's name ("CUDA0", "Vulkan0"), description, type and
free/total memory come from the backend itself, read after `backends.load_backends()` registered every backend.
"""

from __future__ import annotations

import ctypes
from typing import Any

from app.core.predict.hardware import LlamaDevice
from app.engine.llama.backends import ggml_library

# enum ggml_backend_dev_type (ggml-backend.h, llama.cpp vendored by llama-cpp-python 0.3.36)
DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}


def _bind(lib: Any) -> Any:
    lib.ggml_backend_dev_count.argtypes = []
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
        getattr(lib, name).restype = ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                            ctypes.POINTER(ctypes.c_size_t)]
    lib.ggml_backend_dev_memory.restype = None
    lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    return lib


def device_handle(name: str) -> int | None:
    """The ggml_backend_dev_t of the device called `name` ("Vulkan0"), None when there is none."""
    lib = _bind(ggml_library())
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        if (lib.ggml_backend_dev_name(dev) or b"").decode(errors="replace") == name:
            return int(dev)
    return None


def list_backends() -> list[str]:
    """The registered ggml backends ("CPU", "Vulkan", "CUDA"): what this build has, devices visible or not."""
    lib = ggml_library()
    return [(lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i)) or b"").decode(errors="replace")
            for i in range(int(lib.ggml_backend_reg_count()))]


def list_devices() -> list[LlamaDevice]:
    """Every registered device, in llama.cpp's order (the order its offload uses)."""
    lib = _bind(ggml_library())
    out = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        reg = lib.ggml_backend_dev_backend_reg(dev)
        out.append(LlamaDevice(
            name=(lib.ggml_backend_dev_name(dev) or b"").decode(errors="replace"),
            description=(lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace"),
            type=DEVICE_TYPES.get(int(lib.ggml_backend_dev_type(dev)), "unknown"),
            backend=(lib.ggml_backend_reg_name(reg) or b"").decode(errors="replace") if reg else "",
            memory_total=int(total.value), memory_free=int(free.value),
        ))
    return out


def main() -> int:
    """`python -m app.engine.llama.devices`: one JSON line, the devices (app.engine.device_query reads it)."""
    import json
    from dataclasses import asdict

    from app.engine.llama.backends import load_backends

    load_backends()
    print(json.dumps([asdict(d) for d in list_devices()]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
