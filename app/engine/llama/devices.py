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
GGML_TYPE_F32, GGML_TYPE_Q8_0 = 0, 8
PROBE_ROW = 4096  # elements per row of the probe matrix (Q8_0: 4352 bytes)
PROBE_MAX_ROWS = 1 << 22  # 17 GiB of Q8_0: beyond any device's single buffer today


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


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
    lib.ggml_init.argtypes = [_InitParams]
    lib.ggml_init.restype = ctypes.c_void_p
    lib.ggml_free.argtypes = [ctypes.c_void_p]
    lib.ggml_free.restype = None
    lib.ggml_new_tensor_2d.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    lib.ggml_new_tensor_2d.restype = ctypes.c_void_p
    lib.ggml_mul_mat.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.ggml_mul_mat.restype = ctypes.c_void_p
    lib.ggml_backend_dev_supports_op.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.ggml_backend_dev_supports_op.restype = ctypes.c_bool
    return lib


def largest_matrix(lib: Any, dev: int) -> int:
    """Bytes of the largest weight matrix the device multiplies (0: no limit below PROBE_MAX_ROWS rows).

    llama.cpp keeps a weight on the CPU when its layer's device refuses the product with it: a Vulkan device
    refuses a matrix bigger than its maxStorageBufferRange (Mesa's llvmpipe: 128 MiB; discrete GPUs: about 4 GiB),
    so a big vocabulary's output matrix can stay in RAM with every layer offloaded. The device is asked about
    Q8_0 matrices of growing height (tensor descriptions only, nothing allocated)."""
    ctx = lib.ggml_init(_InitParams(1 << 20, None, True))
    if not ctx:
        return 0
    try:
        def supported(rows: int) -> bool:
            weight = lib.ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, PROBE_ROW, rows)
            batch = lib.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, PROBE_ROW, 512)
            return bool(lib.ggml_backend_dev_supports_op(dev, lib.ggml_mul_mat(ctx, weight, batch)))

        if supported(PROBE_MAX_ROWS):
            return 0
        lo, hi = 0, PROBE_MAX_ROWS  # largest supported row count in [lo, hi)
        for _ in range(23):  # each call describes two small tensors: 1 MiB of context holds them all
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if supported(mid) else (lo, mid)
        return lo * PROBE_ROW // 32 * 34
    finally:
        lib.ggml_free(ctx)


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
            max_matrix_bytes=largest_matrix(lib, dev) if int(lib.ggml_backend_dev_type(dev)) in (1, 2) else 0,
        ))
    return out


def offload_devices_now() -> list[dict[str, Any]]:
    """The GPUs with their memory as the backend reports it now (free falls as llama.cpp allocates), for the
    dashboard; the largest-matrix probe is left out (it does not change)."""
    lib = _bind(ggml_library())
    out = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        if DEVICE_TYPES.get(int(lib.ggml_backend_dev_type(dev))) not in ("gpu", "igpu"):
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        out.append({"name": (lib.ggml_backend_dev_name(dev) or b"").decode(errors="replace"),
                    "description": (lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace"),
                    "memory_total": int(total.value), "memory_free": int(free.value)})
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
