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
per-type factors measured with llama.cpp (llama-cpp-python 0.3.36, 2 threads) on zoo models of the same
shape in each quantization on an AVX-512 VNNI CPU; `roofline calibrate` scales them to this machine.
GPUs keep one prefill rate and no decode compute roof (decode there is bandwidth-bound).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Published efficiencies (reference.md): decode reaches 0.85-0.95 of a GPU's theoretical bandwidth; t0 of
# 3-6 ms on GPUs. CPU figures were fitted to quiet-machine measurements on the 2-vCPU AMD EPYC development VM
# (2026-11-30, docs/estimates.md): llama.cpp's decode streams ~1.25x faster than the numpy read probe (prefetching on
# both cores), and synchronising its two threads after each graph node costs ~0.3 ms a layer there, which
# is most of a small model's token time. `roofline calibrate` refits all of them on the user's machine.
ETA_CPU, T0_CPU, T_LAYER_CPU = 1.25, 0.0005, 0.0003
ETA_GPU, T0_GPU = 0.90, 0.004
CPU_FLOPS_PER_CORE = 30e9  # float32 GEMM fallback when no probe ran
# Decode kernel throughput in weights per second per GEMM FLOP/s of the float32 probe (type → factor):
# Q4_K ≈ 47 G weights/s on a 200 GFLOP/s probe (a 7B Q4_K_M decodes at 6-7.5 tok/s there).
DECODE_PER_GEMM: dict[str, float] = {
    "Q4_0": 0.28, "Q4_K": 0.235, "Q5_0": 0.20, "Q5_1": 0.20, "Q5_K": 0.18, "Q6_K": 0.17, "Q8_0": 0.30,
    "F16": 0.12, "BF16": 0.10, "F32": 0.08, "IQ4_NL": 0.24, "Q2_K": 0.20, "Q3_K": 0.18,
}
DECODE_DEFAULT = 0.15
# Prefill matmul FLOP/s per GEMM FLOP/s of the probe (type → factor), for wide matrices: int8 dot products
# (repacked Q4_0/Q4_K GEMMs, tinyBLAS Q8_0) beat the float32 probe; Q6_K takes the generic path.
PREFILL_PER_GEMM: dict[str, float] = {
    "Q4_0": 1.6, "Q4_K": 1.5, "Q5_0": 1.1, "Q5_1": 1.1, "Q5_K": 1.0, "Q6_K": 1.0, "Q8_0": 1.5,
    "F16": 1.0, "BF16": 0.8, "F32": 0.6, "IQ4_NL": 1.4, "Q2_K": 0.8, "Q3_K": 0.8,
}
PREFILL_DEFAULT = 0.8
# The element-wise work around each prefill matmul (norms, rope, activations, copies) grows with the width
# alone, so a width-n model reaches n / (n + PREFILL_WIDTH) of the kernels' rate (640-wide Gemma 3 270M:
# ~140 GFLOP/s, a 1024-wide model ~176, a 3584-wide 7B ~250 on the development VM).
PREFILL_WIDTH = 740.0
ATTENTION_PER_GEMM = 0.5  # attention's own products (KQ, KQV) in f32/f16
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

    @property
    def effective_bandwidth(self) -> float:
        """η · bandwidth in bytes/s."""
        return self.efficiency * self.bandwidth_gbs * 1e9

    def decode_rate(self, ggml_type: str) -> float:
        """Weights/s of a decode matrix-vector product of this type; 0: no compute roof."""
        return self.decode_rates.get(ggml_type, self.decode_rates.get("*", 0.0))

    def prefill_rate(self, ggml_type: str) -> float:
        return self.prefill_rates.get(ggml_type, self.prefill_rates.get("*", self.prefill_flops))


@dataclass
class Rates:
    cpu: DeviceRates
    gpu: DeviceRates | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpu_rates(read_gbs: float, gemm_flops: float, source: str) -> DeviceRates:
    """Uncalibrated CPU rates from a read bandwidth (GB/s) and a float32 GEMM rate (FLOP/s)."""
    decode = {t: f * gemm_flops for t, f in DECODE_PER_GEMM.items()} | {"*": DECODE_DEFAULT * gemm_flops}
    prefill = {t: f * gemm_flops for t, f in PREFILL_PER_GEMM.items()} | {"*": PREFILL_DEFAULT * gemm_flops}
    return DeviceRates("cpu", read_gbs, ETA_CPU, T0_CPU, ATTENTION_PER_GEMM * gemm_flops, decode_rates=decode,
                       prefill_rates=prefill, t_layer_s=T_LAYER_CPU, source=source)


def default_rates(hw: Any, bandwidth: Any = None) -> Rates:
    """Uncalibrated rates for a machine: `hw` a HardwareInfo, `bandwidth` a BandwidthResult (or None)."""
    bw = float(getattr(bandwidth, "read_gbs", 0.0) or 0.0) or 20.0
    gemm = float(getattr(bandwidth, "gemm_gflops", 0.0) or 0.0) * 1e9
    cores = (hw.cpu.physical_cores or hw.cpu.logical_cores or 1) if hw is not None else 1
    cpu = cpu_rates(bw, gemm or CPU_FLOPS_PER_CORE * cores,
                    "measured bandwidth" if bandwidth is not None else "assumed 20 GB/s")
    gpu = None
    best = hw.best_gpu if hw is not None else None
    if best is not None:
        # bandwidth unknown (an unlisted AMD card, NVML refusing): a mid-range figure, said so
        gbs = best.bandwidth_gbs or GPU_BANDWIDTH_GUESS.get(best.vendor, 300.0)
        source = f"{best.name} spec" if best.bandwidth_gbs else f"{best.name}: bandwidth unknown, assumed {gbs:.0f} GB/s"
        gpu_flops = GPU_FLOPS_PER_BYTE.get(best.vendor, 40.0) * gbs * 1e9
        gpu = DeviceRates("gpu", gbs, ETA_GPU, T0_GPU, gpu_flops, source=source)
    return Rates(cpu, gpu)
