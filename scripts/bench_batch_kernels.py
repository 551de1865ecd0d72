"""The batch kernel table (app/core/predict/rates.BATCH_PER_GEMM), measured: run it through
scripts/bench_batch_kernels, alone on a CPU (scripts/bench_isolated) for numbers that repeat.

A decode step of B sequences is a B-column product of every matrix (app/core/predict/batching.py). For each ggml
type this writes two sparse zoo models with every matrix in that type -- Llama-3.2-1B (2048 wide) and a
768-wide 16-layer model with the same 128k vocabulary -- and times, on raw llama.cpp, one llama_decode of B
tokens that all ask for logits (what a B-stream step computes) after 32 tokens of prompt, for each width B.
Per width, the two shapes give two equations, time / B = weights / rate + rows * row_cost / rate, solved
for the rate (printed per GEMM FLOP/s of this machine's one-core probe, as the table keeps it) and the cost
per output row (a negative one: none, the rate from both shapes). It prints the table in the module's
format and each shape's milliseconds.

    scripts/bench_isolated scripts/bench_batch_kernels --types Q4_K Q8_0 [-t 1] [--widths 2,4,8,16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.bench.zoo import ZOO, ZooSpec, write_zoo_model  # noqa: E402

NARROW = ZooSpec("narrow-768", "Narrow 768", "llama", 16, 768, 2048, 12, 4, 64, 128256, 8192, True,
                 rope_base=5e5, params_b=0.2)
SHAPES = (ZOO["llama-3.2-1b"], NARROW)
PROMPT = 32
TYPES = ["Q4_0", "Q4_K", "Q5_0", "Q5_K", "Q6_K", "Q8_0", "Q2_K", "Q3_K", "F16"]
WIDTHS = [1, 2, 3, 4, 6, 8, 12, 16, 32, 128]


_QUIET: list[object] = []  # the log callback, kept alive while llama.cpp holds it


def quiet_llama() -> None:
    """llama.cpp's load and graph logs off (thousands of lines a model)."""
    import ctypes

    import llama_cpp as L

    if not _QUIET:
        _QUIET.append(L.llama_log_callback(lambda level, text, user_data: None))
        L.llama_log_set(_QUIET[0], ctypes.c_void_p(0))


def time_widths(path: Path, widths: list[int], threads: int) -> dict[int, float]:
    """Median seconds of one B-token decode with every row's logits, per width B."""
    import llama_cpp as L

    quiet_llama()
    model = L.llama_model_load_from_file(str(path).encode(), L.llama_model_default_params())
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 1024, 512, 512
    cp.n_threads = cp.n_threads_batch = threads
    ctx = L.llama_init_from_model(model, cp)
    mem = L.llama_get_memory(ctx)
    batch = L.llama_batch_init(512, 0, 1)

    def decode(first: int, n: int, all_logits: bool) -> float:
        batch.n_tokens = n
        for i in range(n):
            batch.token[i] = 1000 + ((first + i) * 7919) % 20000
            batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0] = first + i, 1, 0
            batch.logits[i] = all_logits or i == n - 1
        t0 = time.perf_counter()
        if L.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        L.llama_synchronize(ctx)
        return time.perf_counter() - t0

    out: dict[int, float] = {}
    try:
        for b in widths:
            runs = []
            for _ in range(7 if b <= 16 else 3):
                L.llama_memory_clear(mem, True)
                decode(0, PROMPT, False)
                runs.append(decode(PROMPT, b, True))
            out[b] = statistics.median(runs[1:])  # the first: caches still cold
    finally:
        L.llama_batch_free(batch)
        L.llama_free(ctx)
        L.llama_model_free(model)
    return out


def matrices(spec: ZooSpec, ggml_type: str, path: Path) -> tuple[float, float]:
    """(weights, output rows) of the products one token goes through (the tied embedding as the output)."""
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import weight_groups

    g = weight_groups(inspect_gguf(str(path)), MemoryConfig(n_gpu_layers=0), has_gpu=False)["cpu"][ggml_type]
    return g.elements, g.rows


def solve(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float]:
    """(weights/s, row cost in weights) from two shapes' (weights, rows, seconds per column)."""
    (na, ra, ta), (nb, rb, tb) = a, b
    det = na * rb - nb * ra
    x, y = (ta * rb - tb * ra) / det, (na * tb - nb * ta) / det  # seconds per weight, per row
    if y < 0 or x <= 0:
        return (na + nb) / (ta + tb), 0.0
    return 1 / x, y / x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", nargs="*", default=TYPES)
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    ap.add_argument("-t", "--threads", type=int, default=1)
    args = ap.parse_args()
    widths = sorted({int(w) for w in args.widths.split(",")})
    from app.core.predict.bandwidth import get_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.rates import T0_CPU, T_LAYER_1T

    probe = get_bandwidth(probe_hardware().machine_key)
    gemm = probe.gemm_gflops_1t * 1e9 * args.threads
    print(f"# bench_batch_kernels {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {args.threads} thread(s), "
          f"one-core GEMM probe {probe.gemm_gflops_1t:.1f} GFLOP/s, prompt {PROMPT} tokens")
    table: dict[str, dict[int, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="roofline-kernels-") as tmp:
        for ggml_type in args.types:
            per_shape: list[tuple[float, float, dict[int, float]]] = []
            for spec in SHAPES:
                path = write_zoo_model(spec, "Q8_0", Path(tmp) / f"{spec.key}-{ggml_type}.gguf", uniform=ggml_type)
                n, r = matrices(spec, ggml_type, path)
                times = time_widths(path, widths, args.threads)
                path.unlink()
                per_shape.append((n, r, times))
                print(f"# {ggml_type} {spec.key}: " + ", ".join(f"B={b} {t * 1e3:.1f} ms" for b, t in times.items()),
                      flush=True)
            overhead = T0_CPU + T_LAYER_1T * 16  # both shapes have 16 layers
            row: dict[int, tuple[float, float]] = {}
            for b in widths:
                if b < 2:
                    continue
                (na, ra, ta), (nb, rb, tb) = ((n, r, (t[b] - overhead) / b) for n, r, t in per_shape)
                rate, cost = solve((na, ra, ta), (nb, rb, tb))
                row[b] = (round(rate / gemm, 3), round(cost, -1))
            table[ggml_type] = row
    print("BATCH_PER_GEMM = {")
    for ggml_type, row in table.items():
        print(f'    "{ggml_type}": {{' + ", ".join(f"{b}: ({f}, {c:.0f})" for b, (f, c) in row.items()) + "},")
    print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
