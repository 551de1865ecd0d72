"""Measure one ggml device's real memory bandwidth and compute, through ggml's own C API (any backend).

`python -m app.engine.llama.device_probe --device Vulkan0 --json` prints one JSON line: the device's read
bandwidth from a large matrix-vector product per weight type (what a decode step does: every weight read once,
one vector), a device-to-device copy (`ggml_cpy`, bytes read + written), the FLOP/s of an F16 x F32
matrix-matrix product (what a prompt batch does), and what one small graph node costs (a chain of tiny dependent
products: the dispatch and synchronisation a decode step pays for each of its nodes). Tensors live in the
device's own buffers (`ggml_backend_alloc_ctx_tensors`), graphs run on its backend (`ggml_backend_graph_compute`),
so the figures are what llama.cpp's kernels get from that device: CUDA, Vulkan (llvmpipe included), Metal, ROCm
or the CPU alike. Each figure is the median of timed runs after a warm-up (shader compilation, first touch), at
least three and for at least `--budget-s`. The matrix is 256 MiB, smaller when the device reports less free
memory. Any failure is a one-line error (`{"error": ...}` with --json) and exit status 1, never a trace.

`--list --json` prints the devices (app.engine.llama.devices) instead.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

MiB = 1 << 20

# enum ggml_type values and block layouts (ggml.h / ggml-common.h of the vendored llama.cpp): (enum, elements per
# block, bytes per block, the block's float16 scale bytes as a slice)
TYPES: dict[str, tuple[int, int, int, slice]] = {
    "F16": (1, 1, 2, slice(0, 0)),
    "Q4_0": (2, 32, 18, slice(0, 2)),
    "Q8_0": (8, 32, 34, slice(0, 2)),
    "Q4_K": (12, 256, 144, slice(0, 4)),
    "Q6_K": (14, 256, 210, slice(208, 210)),
    "Q5_0": (6, 32, 22, slice(0, 2)),
}
GGML_TYPE_F32 = 0
DEFAULT_TYPES = ("F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q5_0")
ROW = 4096  # the matrix-vector product's row length: a multiple of every block size, a 7B's width
GEMM_SHAPE = (2048, 2048, 512)  # (rows, row length, columns) of the compute probe: a prompt batch's product
GEMM_FIRST = (512, 512, 128)  # its first, sizing run (and a slow device's only one)
FIRST_BYTES = 4 * MiB  # the first, sizing pass of the bandwidth probes (it also compiles the device's shaders)
TARGET_S = 0.1  # a device too slow for the full size gets probes of about this long each
MATVECS_PER_GRAPH = 4  # products per graph run, so one launch's overhead weighs little on a fast GPU
CHAIN_NODES, CHAIN_WIDTH = 256, 64  # the overhead probe: a chain of tiny products, each waiting for the last


class ProbeError(Exception):
    """The device cannot be probed (no such device, it refuses to start, too little memory, a failed graph)."""


class _InitParams(ctypes.Structure):
    # struct ggml_init_params, passed to ggml_init by value
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


@dataclass
class DeviceMeasurement:
    """What one probe run found; app.core.predict.device_bandwidth keeps it per device."""

    device: str
    description: str
    type: str
    backend: str
    llama_cpp_version: str
    read_gbs: float  # the best matrix-vector bandwidth over the types, GB/s (1e9 bytes)
    matvec_gbs: dict[str, float]  # type -> GB/s of its weights read by a matrix-vector product
    copy_gbs: float  # bytes read + written by a device-to-device copy, GB/s
    gemm_gflops: float  # F16 x F32 matrix-matrix product
    node_us: float  # one small graph node (dispatch + synchronisation), microseconds
    matrix_bytes: int  # the largest matrix-vector product's matrix
    seconds: float


def _bind(lib: Any) -> Any:
    """argtypes and restypes of the ggml calls the probe makes (pointers as void*)."""
    p, sz = ctypes.c_void_p, ctypes.c_size_t
    sigs: dict[str, tuple[list[Any], Any]] = {
        "ggml_init": ([_InitParams], p),
        "ggml_free": ([p], None),
        "ggml_tensor_overhead": ([], sz),
        "ggml_graph_overhead": ([], sz),
        "ggml_new_tensor_1d": ([p, ctypes.c_int, ctypes.c_int64], p),
        "ggml_new_tensor_2d": ([p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64], p),
        "ggml_mul_mat": ([p, p, p], p),
        "ggml_cpy": ([p, p, p], p),
        "ggml_nbytes": ([p], sz),
        "ggml_new_graph": ([p], p),
        "ggml_build_forward_expand": ([p, p], None),
        "ggml_backend_dev_by_name": ([ctypes.c_char_p], p),
        "ggml_backend_dev_init": ([p, ctypes.c_char_p], p),
        "ggml_backend_dev_memory": ([p, ctypes.POINTER(sz), ctypes.POINTER(sz)], None),
        "ggml_backend_dev_backend_reg": ([p], p),
        "ggml_backend_reg_get_proc_address": ([p, ctypes.c_char_p], p),
        "ggml_backend_alloc_ctx_tensors": ([p, p], p),
        "ggml_backend_buffer_free": ([p], None),
        "ggml_backend_tensor_set": ([p, p, sz, sz], None),
        "ggml_backend_graph_compute": ([p, p], ctypes.c_int),
        "ggml_backend_synchronize": ([p], None),
        "ggml_backend_free": ([p], None),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def sample_weights(type_name: str, n_bytes: int, seed: int = 0) -> bytes:
    """`n_bytes` of weights of `type_name` like a real model's: random quants with a small float16 scale per
    block (zeros or random scales would run some kernels faster or into NaNs), random float16 for F16."""
    _, _, block, scale = TYPES[type_name]
    rng = np.random.default_rng(seed)
    if type_name == "F16":
        return (rng.standard_normal(n_bytes // 2, np.float32) * 0.02).astype(np.float16).tobytes()
    blocks = rng.integers(0, 256, (n_bytes // block, block), np.uint8)
    half = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
    blocks[:, scale] = np.resize(half, scale.stop - scale.start)
    return blocks.tobytes()


class _Device:
    """One initialised backend of a named device; `close()` frees it."""

    def __init__(self, lib: Any, name: str, threads: int | None) -> None:
        self.lib = lib
        self.dev = lib.ggml_backend_dev_by_name(name.encode())
        if not self.dev:
            raise ProbeError(f"no ggml device called {name!r}")
        self.backend = lib.ggml_backend_dev_init(self.dev, None)
        if not self.backend:
            raise ProbeError(f"device {name!r} did not initialise")
        reg = lib.ggml_backend_dev_backend_reg(self.dev)
        set_threads = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_set_n_threads") if reg else None
        if set_threads and threads:  # the CPU backend (and BLAS): as many threads as a load would use
            ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)(set_threads)(self.backend, threads)

    def free_memory(self) -> int:
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        self.lib.ggml_backend_dev_memory(self.dev, ctypes.byref(free), ctypes.byref(total))
        return int(free.value or total.value)

    def run(self, build: Callable[[Any, int], tuple[list[int], list[int]]], fill: Callable[[Any, list[int]], None],
            n_tensors: int, budget_s: float, min_runs: int = 3, max_runs: int = 50) -> float:
        """Build a graph with `build(lib, ctx)` -> (tensors to fill, graph outputs), allocate it on the device, fill
        its inputs, run it once to warm up, then time runs: the median seconds of one run."""
        lib = self.lib
        ctx = lib.ggml_init(_InitParams(lib.ggml_tensor_overhead() * (n_tensors + 4) + lib.ggml_graph_overhead(),
                                        None, True))
        if not ctx:
            raise ProbeError("ggml_init failed")
        buf = None
        try:
            inputs, outputs = build(lib, ctx)
            graph = lib.ggml_new_graph(ctx)
            for out in outputs:
                lib.ggml_build_forward_expand(graph, out)
            buf = lib.ggml_backend_alloc_ctx_tensors(ctx, self.backend)
            if not buf:
                raise ProbeError("the device could not allocate the probe's tensors")
            fill(lib, inputs)
            self._compute(graph)  # warm-up: shaders, first touch of the pages
            times: list[float] = []
            start = time.perf_counter()
            while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < budget_s):
                t = time.perf_counter()
                self._compute(graph)
                times.append(time.perf_counter() - t)
            return statistics.median(times)
        finally:
            if buf:
                lib.ggml_backend_buffer_free(buf)
            lib.ggml_free(ctx)

    def _compute(self, graph: int) -> None:
        status = self.lib.ggml_backend_graph_compute(self.backend, graph)
        self.lib.ggml_backend_synchronize(self.backend)
        if status != 0:
            raise ProbeError(f"graph compute failed (ggml_status {status})")

    def close(self) -> None:
        self.lib.ggml_backend_free(self.backend)


def _set(lib: Any, tensor: int, data: bytes, total: int) -> None:
    """Fill `total` bytes of a device tensor by repeating `data` (a few MiB of host memory, not the matrix's size)."""
    chunk = ctypes.create_string_buffer(data, len(data))
    for off in range(0, total, len(data)):
        lib.ggml_backend_tensor_set(tensor, chunk, off, min(len(data), total - off))


def _sized(at: Callable[[int, bool], tuple[float, int]], max_bytes: int) -> tuple[float, int]:
    """Run `at(n_bytes, final)` -> (seconds, bytes) once small (compiling the device's shaders, sizing the rest),
    then at the full size on a device fast enough for it, else at what takes about TARGET_S (a device that runs
    on the CPU is bound by its compute at any size; the full size there would take minutes)."""
    t, n = at(min(FIRST_BYTES, max_bytes), False)
    target = n / max(t, 1e-9) * TARGET_S
    return at(max_bytes if target >= max_bytes else max(FIRST_BYTES, int(target)), True)


def matvec_seconds(dev: _Device, type_name: str, max_bytes: int, budget_s: float) -> tuple[float, int]:
    """(median seconds of one matrix-vector product, the matrix's bytes) for a `type_name` matrix of up to
    `max_bytes`."""
    enum, per_block, block, _ = TYPES[type_name]
    row_bytes = ROW // per_block * block
    sample = sample_weights(type_name, max(1, 4 * MiB // row_bytes) * row_bytes)
    vector = (np.random.default_rng(1).standard_normal(ROW, np.float32)).tobytes()

    def at(n_bytes: int, final: bool) -> tuple[float, int]:
        rows = max(64, n_bytes // row_bytes)
        # several products a graph run at full size, so one launch's overhead weighs little on a fast GPU
        per_graph = MATVECS_PER_GRAPH if final and n_bytes >= max_bytes else 1

        def build(lib: Any, ctx: int) -> tuple[list[int], list[int]]:
            w = lib.ggml_new_tensor_2d(ctx, enum, ROW, rows)
            xs = [lib.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ROW, 1) for _ in range(per_graph)]
            return [w, *xs], [lib.ggml_mul_mat(ctx, w, x) for x in xs]

        def fill(lib: Any, inputs: list[int]) -> None:
            _set(lib, inputs[0], sample, rows * row_bytes)
            for x in inputs[1:]:
                _set(lib, x, vector, len(vector))

        t = dev.run(build, fill, 2 * per_graph + 1, budget_s if final else 0.0, min_runs=3 if final else 1)
        return t / per_graph, rows * row_bytes

    return _sized(at, max_bytes)


def copy_seconds(dev: _Device, max_bytes: int, budget_s: float) -> tuple[float, int]:
    """(median seconds, bytes read + written) of copying an F32 tensor of up to `max_bytes` into another."""

    def at(n_bytes: int, final: bool) -> tuple[float, int]:
        n = max(1024, n_bytes // 4)

        def build(lib: Any, ctx: int) -> tuple[list[int], list[int]]:
            src = lib.ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
            dst = lib.ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)
            return [src], [lib.ggml_cpy(ctx, src, dst)]

        def fill(lib: Any, inputs: list[int]) -> None:
            _set(lib, inputs[0], np.ones(min(n, MiB), np.float32).tobytes(), n * 4)

        return dev.run(build, fill, 3, budget_s if final else 0.0, min_runs=3 if final else 1), n * 4

    t, n_bytes = _sized(at, max_bytes)
    return t, 2 * n_bytes


def gemm_seconds(dev: _Device, budget_s: float) -> tuple[float, float]:
    """(median seconds, FLOPs) of an F16 (rows x k) by F32 (k x cols) matrix product: GEMM_SHAPE, or the small
    GEMM_FIRST shape on a device too slow for it (the first run, which also compiles the shaders, decides)."""

    def at(shape: tuple[int, int, int], final: bool) -> tuple[float, float]:
        m, k, cols = shape
        weights = sample_weights("F16", m * k * 2)
        acts = (np.random.default_rng(2).standard_normal(k * cols, np.float32) * 0.1).tobytes()

        def build(lib: Any, ctx: int) -> tuple[list[int], list[int]]:
            a = lib.ggml_new_tensor_2d(ctx, TYPES["F16"][0], k, m)
            b = lib.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, cols)
            return [a, b], [lib.ggml_mul_mat(ctx, a, b)]

        def fill(lib: Any, inputs: list[int]) -> None:
            _set(lib, inputs[0], weights, len(weights))
            _set(lib, inputs[1], acts, len(acts))

        return dev.run(build, fill, 3, budget_s if final else 0.0, min_runs=3 if final else 1), 2.0 * m * k * cols

    t, flops = at(GEMM_FIRST, False)
    big = 2.0 * GEMM_SHAPE[0] * GEMM_SHAPE[1] * GEMM_SHAPE[2]
    return at(GEMM_SHAPE if t * big / flops <= 4 * TARGET_S else GEMM_FIRST, True)


def node_seconds(dev: _Device, budget_s: float, nodes: int = CHAIN_NODES) -> float:
    """Median seconds one small graph node costs (a chain of `nodes` 64 x 64 matrix-vector products, each needing
    the one before): the dispatch and synchronisation a decode step pays for each of its few hundred nodes."""
    weights = (np.eye(CHAIN_WIDTH, dtype=np.float32) * 0.5).tobytes()
    vector = np.ones(CHAIN_WIDTH, np.float32).tobytes()

    def build(lib: Any, ctx: int) -> tuple[list[int], list[int]]:
        w = lib.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, CHAIN_WIDTH, CHAIN_WIDTH)
        x = lib.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, CHAIN_WIDTH, 1)
        y = x
        for _ in range(nodes):
            y = lib.ggml_mul_mat(ctx, w, y)
        return [w, x], [y]

    def fill(lib: Any, inputs: list[int]) -> None:
        _set(lib, inputs[0], weights, len(weights))
        _set(lib, inputs[1], vector, len(vector))

    return dev.run(build, fill, nodes + 2, budget_s) / nodes


def measure(device: str, matrix_mib: int = 256, types: tuple[str, ...] = DEFAULT_TYPES, budget_s: float = 0.3,
            threads: int | None = None) -> DeviceMeasurement:
    """Probe `device` (llama.cpp's name: "CUDA0", "Vulkan0", "CPU"). Raises ProbeError."""
    import llama_cpp

    from app.engine.llama.backends import ggml_library, load_backends
    from app.engine.llama.devices import list_devices

    start = time.perf_counter()
    unknown = [t for t in types if t not in TYPES]
    if unknown:
        raise ProbeError(f"unknown weight type(s) {', '.join(unknown)} (known: {', '.join(TYPES)})")
    load_backends()
    info = next((d for d in list_devices() if d.name == device), None)
    if info is None:
        names = ", ".join(d.name for d in list_devices()) or "none"
        raise ProbeError(f"no ggml device called {device!r} (devices: {names})")
    lib = _bind(ggml_library())
    if threads is None and info.type == "cpu":
        from app.core.predict.threads import default_threads

        threads = default_threads()
    dev = _Device(lib, device, threads)
    try:
        # the matrix and its copy stay well inside what the device says is free
        free = dev.free_memory()
        if free < 32 * MiB:
            raise ProbeError(f"device {device!r} reports too little free memory ({free // MiB} MiB)")
        matrix = max(MiB, min(matrix_mib * MiB, free // 4))
        matvec: dict[str, float] = {}
        used = 0  # the largest matrix a type was measured with (a slow device's are smaller)
        for t in types:
            seconds, n_bytes = matvec_seconds(dev, t, matrix, budget_s)
            matvec[t] = round(n_bytes / seconds / 1e9, 3)
            used = max(used, n_bytes)
        copy_t, copy_bytes = copy_seconds(dev, matrix // 2, budget_s)
        gemm_t, flops = gemm_seconds(dev, budget_s)
        node_t = node_seconds(dev, budget_s)
    finally:
        dev.close()
    return DeviceMeasurement(
        device=info.name, description=info.description, type=info.type, backend=info.backend,
        llama_cpp_version=str(getattr(llama_cpp, "__version__", "")),
        read_gbs=max(matvec.values()) if matvec else 0.0, matvec_gbs=matvec,
        copy_gbs=round(copy_bytes / copy_t / 1e9, 3), gemm_gflops=round(flops / gemm_t / 1e9, 2),
        node_us=round(node_t * 1e6, 2), matrix_bytes=used, seconds=round(time.perf_counter() - start, 3),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.engine.llama.device_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--device", help='llama.cpp device name, e.g. "CUDA0", "Vulkan0", "CPU"')
    parser.add_argument("--list", action="store_true", help="list ggml's devices instead")
    parser.add_argument("--matrix-mib", type=int, default=256, help="matrix-vector product's matrix size")
    parser.add_argument("--types", default=",".join(DEFAULT_TYPES), help="weight types, comma-separated")
    parser.add_argument("--budget-s", type=float, default=0.3, help="least time spent timing each figure")
    parser.add_argument("--threads", type=int, default=None, help="CPU backend threads")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    try:
        if args.list:
            from dataclasses import asdict

            from app.engine.llama.backends import load_backends
            from app.engine.llama.devices import list_devices

            load_backends()
            found: Any = [asdict(d) for d in list_devices()]
        elif not args.device:
            raise ProbeError("name a device with --device (or --list)")
        else:
            types = tuple(t.strip().upper() for t in args.types.split(",") if t.strip())
            found = measure(args.device, args.matrix_mib, types, args.budget_s, args.threads).__dict__
    except Exception as exc:  # noqa: BLE001 - the probe's contract: a one-line error, never a trace
        message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ProbeError) else str(exc)
        message = message.splitlines()[0] if message else type(exc).__name__
        print(json.dumps({"error": message}) if args.json else f"error: {message}", file=sys.stdout)
        return 1
    if args.json:
        print(json.dumps({"devices": found} if args.list else found))
    else:
        for key, value in (found.items() if isinstance(found, dict) else enumerate(found)):
            print(f"{key:<18} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
