"""The machine rates the speed model runs on, per device and per quantization type, before calibration.

A device has an effective bandwidth (η · measured or specified bandwidth) for streaming weights and the
KV cache, a fixed per-token overhead t0, a per-layer per-token overhead (llama.cpp synchronises its
threads after every graph node: ~25 nodes a layer), and per ggml type two compute rates:

* decode: weights per second a single-token matrix-vector product gets through (dequantize + dot
  product). A type whose kernel is slower than its bytes arrive is compute-bound in decode even on a
  small CPU: this is what makes a Q4_K 7B "stream" at 28 GB/s where a Q8_0 file streams at 44 GB/s.
* prefill: FLOP/s of the matrix-matrix kernels (llama.cpp's repacked Q4_0/Q4_K GEMMs, tinyBLAS for
  Q8_0/F16, the generic vec_dot loop for Q6_K).

Uncalibrated CPU rates are the machine's own probes (numpy read bandwidth, a float32 GEMM) times
per-type factors measured with llama.cpp (llama-cpp-python 0.3.36) on zoo models of the same shape in each
quantization on an AVX-512 VNNI CPU (on x86 without VNNI the quantized types' factors are scaled by
`NO_VNNI_DECODE` / `NO_VNNI_PREFILL`); `roofline calibrate` scales them to this machine, type by type.

Threads: CPU rates are for the thread count a load uses (`threads_for`: llama.cpp's default is the
physical cores for decode, all logical cores for prompt batches). Kernel rates scale with the threads
(each thread runs its share of every matrix product; more threads than physical cores add nothing), memory
bandwidth saturates: n threads read at min(all cores' probe, n × one thread's probe). The per-layer
synchronisation (every graph node ends in a barrier all threads wait at) only exists with two threads or
more; one thread pays a small per-node dispatch cost instead.
GPUs keep one prefill rate and no decode compute roof (decode there is bandwidth-bound).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.core.gguf.quant_types import block_bits
from app.core.predict.threads import default_threads

# Published efficiencies (reference.md): decode reaches 0.85-0.95 of a GPU's theoretical bandwidth; t0 of
# 3-6 ms on GPUs. CPU: one thread that also computes streams weights at 0.75 of the numpy read probe; two or
# more keep the memory busier (0.9: a 7B Q4_K_M is memory-bound on two threads, calibrated at 0.96 in run E).
# Thread barriers cost ~0.3 ms a layer with 2+ threads; one thread only dispatches the nodes (~55 us a layer).
# From scripts/bench_zoo, docs/bench/2026-12-01-estimates-runs.md; `roofline calibrate` refits them.
ETA_CPU, T0_CPU, T_LAYER_CPU = 0.9, 0.0005, 0.0003
ETA_CPU_1T = 0.75  # one thread both computes and streams
T_LAYER_1T = 0.000055  # one thread: no barrier to wait at, only dispatching ~25 graph nodes a layer
ETA_GPU, T0_GPU = 0.90, 0.004
ETA_MEASURED = 1.0  # a device probe's matrix-vector figure is already what decode achieves
GPU_NODES_PER_LAYER = 25  # graph nodes a decode step runs per layer, each paying a measured device's node cost
CPU_FLOPS_PER_CORE = 30e9  # float32 GEMM fallback when no probe ran
# Decode kernel throughput in weights per second per GEMM FLOP/s of the float32 probe (type → factor), one
# thread: Q4_K ≈ 34 G weights/s and Q4_0 ≈ 27 on a 104 GFLOP/s probe (both slower than their bytes arrive);
# Q6_K is memory-bound at one thread already. Q8_0 (14.6 G weights/s) and Q5_0 (~13) are from real weights:
# zoo files (zero weights) decode 1.3-1.4x faster in those two types, not in Q4_0/Q4_K/Q6_K. From
# scripts/bench_zoo and scripts/bench_predict, docs/bench/2026-12-01-estimates-runs.md.
DECODE_PER_GEMM: dict[str, float] = {
    "Q4_0": 0.26, "Q4_K": 0.33, "Q5_0": 0.125, "Q5_1": 0.125, "Q5_K": 0.25, "Q6_K": 0.30, "Q8_0": 0.14,
    "F16": 0.17, "BF16": 0.14, "F32": 0.11, "IQ4_NL": 0.34, "Q2_K": 0.28, "Q3_K": 0.25, "MXFP4": 0.31,
}
DECODE_DEFAULT = 0.21
# Prefill matmul FLOP/s per GEMM FLOP/s of the probe (type → factor), for wide matrices, one thread (pp512 of
# Llama-3.2-1B in each type): int8 dot products beat the float32 probe; Q6_K's GEMM is the fastest there.
PREFILL_PER_GEMM: dict[str, float] = {
    "Q4_0": 1.53, "Q4_K": 1.75, "Q5_0": 1.25, "Q5_1": 1.25, "Q5_K": 1.4, "Q6_K": 2.3, "Q8_0": 1.36,
    "F16": 1.15, "BF16": 0.9, "F32": 0.7, "IQ4_NL": 1.5, "Q2_K": 0.9, "Q3_K": 0.9, "MXFP4": 1.1,
}
# MXFP4 (gpt-oss's experts) from scripts/bench_kernel_types: its MoE probe (gpt-oss-20b's layers, random
# weights and router) against the Q4_0 probe interleaved, on an AVX2 CPU through NO_VNNI's scales
# (docs/bench/2026-12-03-kernel-types-mxfp4.txt); its prefill factor is for dense-sized products, the experts'
# small ones then pay MOE_PREFILL_EFFICIENCY like every type's.
PREFILL_DEFAULT = 0.9
# Matrix products of a few columns (a decode step of B sequences batched together, app.core.predict.batching), by
# type and column count: (weights/s per GEMM FLOP/s of the probe, one thread; a cost per output row, in
# weights). llama.cpp picks the kernel by type and width: below 4 columns the matrix-vector kernel once per
# column (a Q4_K column costs what a decode does), the repacked Q4_0/Q4_K GEMMs only for whole 4- or
# 16-column tiles, tinyBLAS for Q8_0/Q5_0/F16, a tiled K-quant path from 8 columns (slower than the plain
# loop for Q6_K at 8), so the rate climbs unevenly to the prefill rate. Each output row and column also costs
# a fixed amount (a reduction and a store, tinyBLAS's tile set-up): large for tinyBLAS at a few columns
# (~1100 weights' worth for Q8_0), which a narrow model, whose rows are short, pays over fewer weights.
# From scripts/bench_batch_kernels on raw llama.cpp (AVX-512 VNNI, 101 GFLOP/s probe, one thread, one run;
# docs/bench/2026-12-01-batch-kernels-1thread-isolated.txt): a B-token batch of every row's logits, depth 32,
# on two shapes in one type each (Llama-3.2-1B, 2048 wide, and a 768-wide 16-layer model with its 128k
# vocabulary), the two unknowns solved from the two shapes (a negative row cost: none, the rate from both).
# A width between two measured ones runs at the lower one's.
BATCH_PER_GEMM: dict[str, dict[int, tuple[float, float]]] = {
    "Q4_0": {2: (0.343, 0), 3: (0.346, 0), 4: (0.494, 280), 6: (0.44, 200), 8: (0.497, 240),
             12: (0.503, 260), 16: (0.689, 180), 32: (0.7, 210), 128: (0.664, 100)},
    "Q4_K": {2: (0.383, 100), 3: (0.383, 80), 4: (0.433, 250), 6: (0.418, 150), 8: (0.452, 200),
             12: (0.423, 110), 16: (0.68, 80), 32: (0.677, 70), 128: (0.713, 110)},
    "Q5_0": {2: (0.329, 1310), 3: (0.362, 1050), 4: (0.476, 1420), 6: (0.372, 950), 8: (0.407, 390),
             12: (0.388, 110), 16: (0.381, 70), 32: (0.419, 130), 128: (0.419, 50)},
    "Q5_K": {2: (0.213, 30), 3: (0.226, 70), 4: (0.234, 110), 6: (0.244, 170), 8: (0.45, 390),
             12: (0.627, 330), 16: (0.852, 440), 32: (1.154, 440), 128: (1.28, 260)},
    "Q6_K": {2: (0.255, 0), 3: (0.283, 30), 4: (0.313, 170), 6: (0.356, 380), 8: (0.194, 0),
             12: (0.262, 0), 16: (0.334, 0), 32: (0.534, 180), 128: (0.899, 220)},
    "Q8_0": {2: (0.272, 1120), 3: (0.299, 760), 4: (0.424, 1110), 6: (0.295, 540), 8: (0.46, 590),
             12: (0.448, 330), 16: (0.508, 340), 32: (0.554, 380), 128: (0.527, 120)},
    "Q2_K": {2: (0.404, 0), 3: (0.405, 0), 4: (0.273, 50), 6: (0.307, 50), 8: (0.28, 20),
             12: (0.274, 0), 16: (0.408, 80), 32: (0.2, 0), 128: (0.221, 0)},
    "Q3_K": {2: (0.241, 50), 3: (0.261, 120), 4: (0.271, 180), 6: (0.281, 210), 8: (0.229, 0),
             12: (0.344, 10), 16: (0.452, 30), 32: (0.591, 0), 128: (0.902, 100)},
    "F16": {2: (0.098, 10), 3: (0.276, 780), 4: (0.354, 720), 6: (0.431, 570), 8: (0.379, 420),
             12: (0.462, 410), 16: (0.476, 390), 32: (0.276, 0), 128: (0.483, 180)},
}
# llama.cpp's quantized kernels multiply the weights' integer quants by int8 activations: with AVX512_VNNI or
# AVX_VNNI one instruction does the 4-way multiply-add that plain AVX2 needs three for (maddubs, madd, add),
# while the float32 GEMM probe runs alike on both. The factors above were measured with VNNI; without it the
# integer kernels run slower against the probe, by type: the per-type calibrated scales of an AVX2-only CPU
# (scripts/bench_zoo, docs/bench/2026-12-01-bench_zoo-1thread-isolated-epyc-K.txt), Q6_K decode (memory-bound
# there) and other types at the Q4_K figure.
# MXFP4 takes Q4_0's: its kernels look its 4-bit codes up in a table and multiply them by int8 activations with
# the same instructions (ggml-cpu's x86 quants.c and repack.cpp).
NO_VNNI_DECODE = {"Q4_K": 0.62, "Q4_0": 0.75, "Q8_0": 0.88, "MXFP4": 0.75}
NO_VNNI_PREFILL = {"Q4_K": 0.62, "Q6_K": 0.48, "Q8_0": 0.70, "Q4_0": 0.78, "MXFP4": 0.78}
NO_VNNI_DEFAULT = 0.62
# The types llama.cpp repacks (app.core.predict.repack), multiplied without their repacked copy: with a GPU device
# in use the CPU layers' weights sit in the device's host buffer instead (app.core.predict.host_offload), and the
# CPU runs its plain kernels on them: decode's row-by-row dot product instead of the interleaved 8-row one, and a
# prompt batch the generic matrix loop (Q4_K: no tinyBLAS kernel; Q4_0: tinyBLAS). Type -> (decode, prefill) rate
# of the plain kernels / the repacked ones: llama-bench --repack 0 against 1, one thread, a 2048-wide 4-layer model
# in each type, the best of 14 runs each on a shared AVX2 EPYC without VNNI (docs/bench/2026-12-03-gpu-check-
# llvmpipe.md; pp16 and pp512 alike). A type without an entry (ARM's other repacked types) keeps its rates.
UNREPACKED: dict[str, tuple[float, float]] = {"Q4_K": (0.95, 0.85), "Q4_0": (0.8, 0.7)}
FLOAT_TYPES = frozenset({"F16", "BF16", "F32"})  # no int8 dot product: the probe's own kind of kernel
# The element-wise work around each prefill matmul (norms, rope, activations, copies) grows with the width
# alone, so a width-n model reaches n / (n + PREFILL_WIDTH) of the kernels' rate (640-wide Gemma 3 270M:
# ~140 GFLOP/s, a 1024-wide model ~176, a 3584-wide 7B ~250 on one AVX-512 core).
PREFILL_WIDTH = 740.0
# A MoE prompt batch multiplies each expert by only the tokens routed to it (llama.cpp's mul_mat_id: rows
# gathered per expert, ~n_tokens x used / experts of them, e.g. 64 of 512 for OLMoE): these small products
# reach ~0.6 of a dense matmul's rate (OLMoE-1B-7B pp512, one thread).
MOE_PREFILL_EFFICIENCY = 0.6
ATTENTION_PER_GEMM = 0.5  # attention's own products (KQ, KQV) in f32/f16
# Decode attention on the CPU (llama.cpp without flash attention): each query head takes a head_dim-long dot
# product with every cached K row, then weights the V rows, which are stored transposed. Neither cache is read as
# a weight matrix is: a K row holds every KV head's slice, so each head reads short pieces at a stride, and the
# products are too short to hide those reads behind. So the cache's bytes and its products are two costs added,
# the bytes at this many times a weight's time per byte. Fitted to the time depth adds to a token on shapes of
# 2-6 layers with real widths and head layouts (MHA and GQA, head_dim 64 and 128, sliding window; scripts/
# bench_zoo --depth, docs/bench/2026-12-06-bench_zoo-depth-*, one thread; docs/estimates.md, decode at depth).
ATTENTION_READ_SLOWDOWN = 1.5
# Effective prefill FLOP/s per byte/s of memory bandwidth, by GPU family (published llama.cpp pp512).
GPU_FLOPS_PER_BYTE = {"nvidia": 100.0, "amd": 60.0, "apple": 20.0}
GPU_BANDWIDTH_GUESS = {"nvidia": 400.0, "amd": 400.0, "apple": 100.0}


@dataclass
class DeviceRates:
    device: str  # "cpu" | "gpu"
    bandwidth_gbs: float  # measured (CPU) or theoretical (GPU)
    efficiency: float  # η: share of the bandwidth decode achieves
    t0_s: float  # fixed time per token
    prefill_flops: float  # attention and any type without its own rate, FLOP/s
    calibrated: bool = False
    decode_rates: dict[str, float] = field(default_factory=dict)  # type → weights/s (absent: no roof)
    prefill_rates: dict[str, float] = field(default_factory=dict)  # type → FLOP/s (absent: prefill_flops)
    t_layer_s: float = 0.0  # per repeating layer per token (graph-node synchronisation)
    source: str = ""
    threads: int = 0  # CPU: the llama.cpp threads (decode) these rates are for; 0: not said (GPU)
    # type → columns → (weights/s, cost per output row in weights) of products of a few columns
    batch_rates: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)
    # type → (decode, prefill) factor on the rates when its weights are not repacked (UNREPACKED)
    unrepacked: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def effective_bandwidth(self) -> float:
        """η · bandwidth in bytes/s."""
        return self.efficiency * self.bandwidth_gbs * 1e9

    def decode_rate(self, ggml_type: str, repacked: bool = True) -> float:
        """Weights/s of a decode matrix-vector product of this type; 0: no compute roof. `repacked` False: the
        weights are in plain layout where llama.cpp would have repacked them (the plain kernels' rate)."""
        rate = self.decode_rates.get(ggml_type, self.decode_rates.get("*", 0.0))
        return rate if repacked else rate * self.unrepacked.get(ggml_type, (1.0, 1.0))[0]

    def prefill_rate(self, ggml_type: str, repacked: bool = True) -> float:
        rate = self.prefill_rates.get(ggml_type, self.prefill_rates.get("*", self.prefill_flops))
        return rate if repacked else rate * self.unrepacked.get(ggml_type, (1.0, 1.0))[1]

    def batch_rate(self, ggml_type: str, columns: int) -> tuple[float, float]:
        """(weights/s, cost per output row in weights) of a `columns`-column product of this type: the
        measured width at or below `columns`; (0, 0) when none is known."""
        table = self.batch_rates.get(ggml_type) or self.batch_rates.get("*", {})
        below = [w for w in table if w <= columns]
        return table[max(below)] if below else (0.0, 0.0)


def width_factor(n_embd: int) -> float:
    """The share of the kernels' rate a model `n_embd` wide reaches in a matrix product of many columns: the
    element-wise work around each product (norms, rope, activations, copies) grows with the width only."""
    return n_embd / (n_embd + PREFILL_WIDTH) if n_embd else 1.0


@dataclass
class Rates:
    cpu: DeviceRates
    gpu: DeviceRates | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def threads_for(hw: Any, n_threads: int | None = None, n_threads_batch: int | None = None) -> tuple[int, int]:
    """(decode threads, prompt-batch threads) a load uses, as the engine decides them: the given ones, else
    `threads.default_threads` for the machine's CPU (batches follow n_threads when only that is given)."""
    cpu = getattr(hw, "cpu", None) or CPUCounts()
    decode = n_threads or default_threads(cpu)
    return decode, n_threads_batch or n_threads or default_threads(cpu, batch=True)


class CPUCounts:
    """No CPU facts at all: one thread."""

    physical_cores = logical_cores = 1
    usable_cpus = None


def thread_scale(threads: int, probe_threads: int, cores: int) -> float:
    """Compute of `threads` llama.cpp threads relative to a probe run on `probe_threads` (one kernel per
    thread): linear up to the cores, nothing gained beyond them."""
    return max(1, min(threads, cores)) / max(1, min(probe_threads, cores))


def bandwidth_for_threads(threads: int, read_gbs: float, read_gbs_1t: float, probe_threads: int) -> float:
    """Read bandwidth (GB/s) with `threads` threads from the all-thread and one-thread probes: n threads
    read n times one thread's bandwidth until the memory system saturates at the all-thread figure."""
    if threads >= probe_threads or not read_gbs_1t:
        return read_gbs if threads >= probe_threads else read_gbs * threads / probe_threads
    return min(read_gbs, read_gbs_1t * threads)


def has_vnni(hw: Any) -> bool:
    """False only on an x86 CPU whose features were read and show AVX2 without AVX512_VNNI or AVX_VNNI (the
    uncalibrated factors' machine had VNNI; ARM and unknown CPUs keep them)."""
    features = set(getattr(getattr(hw, "cpu", None), "features", None) or ())
    return not ("AVX2" in features and not features & {"AVX512_VNNI", "AVX_VNNI"})


def cpu_rates(read_gbs: float, gemm_flops: float, source: str, *, threads: int = 0, batch_threads: int = 0,
              probe_threads: int = 0, cores: int = 0, read_gbs_1t: float = 0.0,
              gemm_flops_1t: float = 0.0, vnni: bool = True) -> DeviceRates:
    """Uncalibrated CPU rates from a read bandwidth (GB/s) and a float32 GEMM rate (FLOP/s) measured with
    `probe_threads` threads, for `threads` decode and `batch_threads` prompt-batch threads (0: as probed).
    With the one-core GEMM probe (`gemm_flops_1t`) the kernels scale from it, linearly up to the cores:
    llama.cpp's kernels do (a 1B's pp512 2.0x, a memory-light Q8_0 decode ~2x from one to two threads), the
    all-core numpy figure does not."""
    probe = probe_threads or threads or 1
    cores = cores or max(probe, threads, batch_threads, 1)
    n, nb = threads or probe, batch_threads or threads or probe
    if gemm_flops_1t:
        dec_flops, pre_flops = (gemm_flops_1t * thread_scale(t, 1, cores) for t in (n, nb))
    else:
        dec_flops, pre_flops = gemm_flops * thread_scale(n, probe, cores), gemm_flops * thread_scale(nb, probe, cores)
    bw = bandwidth_for_threads(n, read_gbs, read_gbs_1t, probe)
    def q(t: str, table: dict[str, float]) -> float:  # the integer-dot-product kernels without VNNI
        return 1.0 if vnni or t in FLOAT_TYPES else table.get(t, NO_VNNI_DEFAULT)

    decode = ({t: f * q(t, NO_VNNI_DECODE) * dec_flops for t, f in DECODE_PER_GEMM.items()}
              | {"*": DECODE_DEFAULT * q("*", NO_VNNI_DECODE) * dec_flops})
    prefill = ({t: f * q(t, NO_VNNI_PREFILL) * pre_flops for t, f in PREFILL_PER_GEMM.items()}
               | {"*": PREFILL_DEFAULT * q("*", NO_VNNI_PREFILL) * pre_flops})
    # a step of several tokens runs on the prompt-batch threads (llama.cpp: n_threads_batch past one token);
    # a few columns run the decode kernels (their no-VNNI factors)
    batch = {t: {w: (f * q(t, NO_VNNI_DECODE) * pre_flops, row) for w, (f, row) in tab.items()}
             for t, tab in BATCH_PER_GEMM.items()}
    return DeviceRates("cpu", bw, ETA_CPU if n > 1 else ETA_CPU_1T, T0_CPU, ATTENTION_PER_GEMM * pre_flops,
                       decode_rates=decode, prefill_rates=prefill, t_layer_s=T_LAYER_CPU if n > 1 else T_LAYER_1T,
                       source=source, threads=n, batch_rates=batch, unrepacked=dict(UNREPACKED))


def measured_gpu_rates(measured: Any) -> DeviceRates:
    """GPU rates from a device probe (a device_bandwidth.DeviceBandwidth): its best matrix-vector bandwidth at
    η = 1 (the probe's product is a decode step's own kernel, so its figure is already what decode gets), each
    measured type's own matrix-vector rate as that type's decode roof (a type whose kernel runs below the best
    bandwidth, as on a CPU-emulated device, costs its own time), the measured GEMM as the prefill rate, and the
    measured cost of a graph node times the nodes of a layer as the per-layer overhead."""
    decode = {t: gbs * 1e9 * 8 / block_bits(t) for t, gbs in measured.matvec_gbs.items() if gbs > 0}
    gbs = float(measured.read_gbs)
    flops = float(measured.gemm_gflops) * 1e9 or GPU_FLOPS_PER_BYTE.get("nvidia", 40.0) * gbs * 1e9
    t_layer = float(getattr(measured, "node_us", 0.0) or 0.0) * 1e-6 * GPU_NODES_PER_LAYER
    return DeviceRates("gpu", gbs, ETA_MEASURED, T0_GPU, flops, decode_rates=decode, t_layer_s=t_layer,
                       source=f"measured: {measured.label()}")


def _measured_device(hw: Any, best: Any) -> Any:
    """The measured device for this machine's GPU (app.core.predict.device_bandwidth's cache), unless the
    installed llama.cpp cannot offload."""
    if hw is None or getattr(hw, "gpu_offload", None) is False or not hasattr(hw, "machine_key"):
        return None
    if getattr(hw, "llama_devices", None) is not None and best is None:
        return None  # llama.cpp was asked and sees no GPU (hidden, or its backend not built): a cached one is moot
    from app.core.predict.device_bandwidth import measured_gpu

    return measured_gpu(hw.machine_key, best.name if best is not None else None)


def default_rates(hw: Any, bandwidth: Any = None, threads: int | None = None,
                  batch_threads: int | None = None, device: Any = None) -> Rates:
    """Uncalibrated rates for a machine: `hw` a HardwareInfo, `bandwidth` a BandwidthResult (or None), for
    the threads a load uses (None: llama.cpp's default, see `threads_for`). The GPU's rates come from a
    measured device (`device`, a DeviceBandwidth; None: the one cached for this machine) when there is one,
    else from the best GPU's specification; `rates.gpu.source` says which."""
    n, nb = threads_for(hw, threads, batch_threads)
    cores = (hw.cpu.physical_cores or hw.cpu.logical_cores or 1) if hw is not None else 1
    bw = float(getattr(bandwidth, "read_gbs", 0.0) or 0.0) or 20.0
    gemm = float(getattr(bandwidth, "gemm_gflops", 0.0) or 0.0) * 1e9
    probe = int(getattr(bandwidth, "threads", 0) or 0) if gemm else cores
    cpu = cpu_rates(bw, gemm or CPU_FLOPS_PER_CORE * cores,
                    "measured bandwidth" if bandwidth is not None else "assumed 20 GB/s", threads=n, batch_threads=nb,
                    probe_threads=probe or cores, cores=cores,
                    read_gbs_1t=float(getattr(bandwidth, "read_gbs_1t", 0.0) or 0.0),
                    gemm_flops_1t=float(getattr(bandwidth, "gemm_gflops_1t", 0.0) or 0.0) * 1e9,
                    vnni=has_vnni(hw))
    gpu = None
    best = hw.best_gpu if hw is not None else None
    measured = device if device is not None else _measured_device(hw, best)
    if measured is not None:
        gpu = measured_gpu_rates(measured)
    elif best is not None:
        # bandwidth unknown (an unlisted AMD card, NVML refusing): a mid-range figure, said so
        gbs = best.bandwidth_gbs or GPU_BANDWIDTH_GUESS.get(best.vendor, 300.0)
        source = (f"{best.name} spec (theoretical)" if best.bandwidth_gbs
                  else f"{best.name}: bandwidth unknown, assumed {gbs:.0f} GB/s")
        gpu_flops = GPU_FLOPS_PER_BYTE.get(best.vendor, 40.0) * gbs * 1e9
        gpu = DeviceRates("gpu", gbs, ETA_GPU, T0_GPU, gpu_flops, source=source)
    return Rates(cpu, gpu)
