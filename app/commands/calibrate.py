"""`roofline calibrate [-m MODEL]`: measure real decode and prefill through the engine on more than one
model shape — the model given (default: the embedded one) plus zoo models written on the fly as sparse
files in a temporary directory (real shapes, no download) — fit the speed model's scales and store them
for this machine and backend."""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.commands import _args as A
from app.commands._common import add_model_arg, fail, inspect_or_fail, print_json, resolve_model

if TYPE_CHECKING:
    from app.core.gguf.info import GGUFInfo
    from app.core.predict.calibration import Sample
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import Rates

# Zoo models that calibrate alongside the given one: small enough to write and run in seconds, big enough
# that their weights, not the per-layer overhead, set their speed; one shape in two quantizations, so the
# memory bandwidth (Q6_K: memory-bound) and the 4-bit kernels (Q4_K_M) are told apart. Zoo files hold zero
# weights: Q4_K and Q6_K decode as fast on zeros as on real weights, Q8_0 and Q5_0 do not (1.3-1.4x faster
# on zeros, one thread), so no Q8_0 shape here. The default model (18 small layers) pins the per-layer cost.
CALIBRATION_ZOO = (("llama-3.2-1b", "Q6_K"), ("llama-3.2-1b", "Q4_K_M"))
# Kernel probes: a short model of the same width (`zoo.kernel_probe`, 4 layers) in each of two more common
# types, decoded and given a prompt batch: each machine's kernels differ by type far more than one factor
# says (Q8_0 prefill ran 0.58x Q4_K's on one CPU, 0.77x on another; Q8_0 decode 1.7x faster than
# Q4_K-calibrated rates on a third: docs/bench/2026-12-01-estimates-runs.md), so these types get scales of
# their own. The probes get random weights (`zoo.fill_weights`, ~0.5 s, ~500 MB in the temporary directory):
# zeros decode Q8_0 faster than real weights.
KERNEL_PROBES = ("Q8_0", "Q4_0")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure decode/prefill speed on 3 model shapes and the "
                                         "kernels of 2 more quantizations (~2 min) and fit the speed model to it")
    add_model_arg(p)
    p.add_argument("--depth", type=int, default=1024,
                   help="also decode the first model with this many tokens in the KV cache (0: skip)")
    p.add_argument("--zoo", type=int, default=len(CALIBRATION_ZOO), choices=range(len(CALIBRATION_ZOO) + 1),
                   help=f"how many zoo shapes to add (default {len(CALIBRATION_ZOO)}; 0: none, and no "
                        "kernel probes either)")
    p.add_argument("-ngl", "--n-gpu-layers", type=int, default=0, help="calibrate the GPU backend (-1: all)")
    p.add_argument("-t", "--threads", type=A.threads, default=None)
    p.add_argument("-r", "--repetitions", type=int, default=3, help="runs per measurement (default 3)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


@dataclass
class Measured:
    samples: list[Sample]
    n_threads: int
    gpu_offload: bool


def measure(engine: Any, info: GGUFInfo, cfg: MemoryConfig, model_path: str, rates: Rates, *, n_gen: int = 32,
            n_prompt: int = 256, depths: tuple[int, ...] = (0,), repetitions: int = 3,
            n_threads: int | None = None, progress: Any = None, label: str = "", probe: bool = False) -> Measured:
    """Run tg (at each depth) and pp through a started EngineClient: samples with the speed model's parts
    at `rates` (the base the calibration scales)."""
    from app.core.predict.calibration import Sample
    from app.core.predict.speed import cost_parts
    from app.engine import protocol as P

    label = label or model_path
    need = max(depths, default=0) + n_gen + n_prompt
    n_ctx = max(cfg.n_ctx, -(-need // 256) * 256)
    engine.load(P.LoadConfig(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, n_batch=cfg.n_batch,
                             n_ubatch=cfg.n_ubatch, n_gpu_layers=cfg.n_gpu_layers, type_k=cfg.type_k,
                             type_v=cfg.type_v, flash_attn=cfg.flash_attn, swa_full=cfg.swa_full))
    has_gpu = bool(engine.ready and engine.ready.gpu_offload)
    used = rates if has_gpu else type(rates)(rates.cpu, None)
    dev = "gpu" if has_gpu and cfg.n_gpu_layers else "cpu"
    samples: list[Sample] = []
    threads = 0
    for depth in depths:
        if progress:
            progress(f"{label}: decode tg{n_gen} at depth {depth}")
        res = engine.bench(P.Bench(request_id=engine.new_request_id("cal"), n_gen=n_gen, n_depth=depth,
                                   repetitions=repetitions if depth == 0 else max(2, repetitions - 1),
                                   warmup=depth == 0))
        threads = res.n_threads
        parts = cost_parts(info, used, cfg, depth=depth + (n_gen - 1) // 2)[dev]
        samples += [Sample("decode", n_gen / (ns / 1e9), 1, parts, label, depth, probe) for ns in res.samples_ns]
    if progress:
        progress(f"{label}: prefill pp{n_prompt}")
    res = engine.bench(P.Bench(request_id=engine.new_request_id("cal"), n_prompt=n_prompt, repetitions=repetitions,
                               warmup=not depths))  # after decoding, the weights are paged in already
    parts = cost_parts(info, used, cfg, n_prompt=n_prompt)[dev]
    samples += [Sample("prefill", n_prompt / (ns / 1e9), n_prompt, parts, label, probe=probe)
                for ns in res.samples_ns]
    return Measured(samples, threads, has_gpu)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from app.core.bench.zoo import kernel_probe, zoo_path
    from app.core.gguf.info import inspect_gguf
    from app.core.predict import calibration
    from app.core.predict.bandwidth import get_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import default_rates, predict
    from app.engine.client import EngineClient, EngineError

    path = resolve_model(args.model)
    info = inspect_or_fail(path)
    if info is None:
        return 1
    hw = probe_hardware()
    bw = get_bandwidth(hw.machine_key)
    before = default_rates(hw, bw, threads=args.threads)  # the engine gets the same threads (args or default)
    cfg = MemoryConfig(n_ctx=2048, n_gpu_layers=args.n_gpu_layers)
    depths = (0, args.depth) if args.depth > 0 else (0,)

    def say(msg: str) -> None:
        if not args.json:
            print(f"  {msg} ...", file=sys.stderr)

    samples: list[Sample] = []
    first: list[Sample] = []
    threads, gpu = 0, False
    with tempfile.TemporaryDirectory(prefix="roofline-zoo-") as tmp:
        runs: list[tuple[Path, GGUFInfo, tuple[int, ...], bool]] = [(path, info, depths, False)]
        for key, quant in CALIBRATION_ZOO[:args.zoo]:
            zp = zoo_path(key, quant, Path(tmp))  # sparse: a few MB on disk, written in under a second
            runs.append((zp, inspect_gguf(zp), (0,), False))
        for quant in KERNEL_PROBES if args.zoo else ():
            zp = zoo_path(kernel_probe(), quant, Path(tmp), random_weights=True)
            runs.append((zp, inspect_gguf(zp), (0,), True))
        try:
            with EngineClient() as engine:
                for p, inf, ds, probe in runs:
                    m = measure(engine, inf, cfg, str(p), before, depths=ds, n_threads=args.threads,
                                repetitions=max(1, args.repetitions), progress=say, label=p.name, probe=probe)
                    samples += m.samples
                    first = first or m.samples
                    threads, gpu = m.n_threads, m.gpu_offload
        except EngineError as exc:
            return fail(f"the engine failed: {exc}")
    backend = "gpu" if gpu and args.n_gpu_layers else "cpu"
    base = before.cpu if backend == "cpu" or before.gpu is None else before.gpu
    if threads and threads != before.cpu.threads:
        return fail(f"the engine ran {threads} threads, the speed model assumed {before.cpu.threads}: pass -t")
    cal = calibration.calibrate(hw.machine_key, backend, samples, base, n_threads=before.cpu.threads)
    calibration.store(cal)
    after = calibration.calibrated_rates(before, hw.machine_key, "cpu", "gpu")
    p0, p1 = predict(info, before, cfg, n_gen=32, n_prompt=256), predict(info, after, cfg, n_gen=32, n_prompt=256)
    measured_tg = sorted(s.tokens_per_s for s in first if s.kind == "decode" and s.depth == 0)
    measured_pp = sorted(s.tokens_per_s for s in first if s.kind == "prefill")
    if args.json:
        print_json({"calibration": cal.to_dict(), "uncalibrated": p0.to_dict(), "calibrated": p1.to_dict(),
                    "measured_decode_tps": measured_tg, "measured_prefill_tps": measured_pp})
        return 0
    eta = cal.effective_bandwidth_gbs / bw.read_gbs if backend == "cpu" else None
    print(f"calibrated {backend} on {len(cal.models)} models ({', '.join(cal.models)}; {threads} threads):")
    print(f"  decode: effective bandwidth {cal.effective_bandwidth_gbs:.1f} GB/s"
          + (f" (η = {eta:.2f} of the measured {bw.read_gbs:.1f} GB/s)" if eta else "")
          + f", kernels {cal.decode_scale:.2f}× the uncalibrated rates"
          + "".join(f" ({t} ×{v:.2f})" for t, v in sorted(cal.decode_type_scales.items()))
          + f", per-token overhead {cal.t0_s * 1000:.2f} ms"
          + ("" if cal.t0_fitted else " (default)"))
    own = ", ".join(f"{t} ×{v:.2f}" for t, v in sorted(cal.prefill_type_scales.items()))
    print(f"  prefill: matmul kernels {cal.prefill_scale:.2f}× the uncalibrated rates"
          + (f" (on top of that, by type: {own})" if own else "") + "; "
          f"fit error {cal.fit_error * 100:.0f} % rms over {len(samples)} runs")
    print(f"  {path.name} decode tok/s: measured {measured_tg[len(measured_tg) // 2]:.1f}, "
          f"predicted {p0.decode_tps:.1f} before / {p1.decode_tps:.1f} after calibration ({p1.decode_bound}-bound)")
    print(f"  {path.name} prefill tok/s: measured {measured_pp[len(measured_pp) // 2]:.1f}, "
          f"predicted {p0.prefill_tps:.1f} before / {p1.prefill_tps:.1f} after calibration")
    print("stored for this machine: `roofline recommend` now labels its predictions 'calibrated'.")
    return 0
