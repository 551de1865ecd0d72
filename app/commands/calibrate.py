"""`roofline calibrate [-m MODEL]`: measure real decode and prefill through the engine, fit the speed
model's rates (η·BW, t0, prefill FLOP/s) and store them for this machine and backend."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.commands._common import add_model_arg, fail, print_json, resolve_model

if TYPE_CHECKING:
    from app.core.calibration import DecodeSample, PrefillSample
    from app.core.gguf_info import GGUFInfo
    from app.core.memory import MemoryConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure decode/prefill speed (~10 s) and fit the speed model to it")
    add_model_arg(p)
    p.add_argument("--depth", type=int, default=1024,
                   help="also decode with this many tokens in the KV cache (fits the fixed overhead; 0: skip)")
    p.add_argument("-ngl", "--n-gpu-layers", type=int, default=0, help="calibrate the GPU backend (-1: all)")
    p.add_argument("-t", "--threads", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


@dataclass
class Measured:
    decode: list[DecodeSample]
    decode_depths: list[int]  # the depth of each decode sample
    prefill: list[PrefillSample]
    n_threads: int
    gpu_offload: bool


def measure(engine: Any, info: GGUFInfo, cfg: MemoryConfig, model_path: str, *, n_gen: int = 32,
            n_prompt: int = 512, depths: tuple[int, ...] = (0,), repetitions: int = 3,
            n_threads: int | None = None, progress: Any = None) -> Measured:
    """Run tg (at each depth) and pp through a started EngineClient; samples for calibration."""
    from app.core.calibration import DecodeSample, PrefillSample
    from app.core.speed import decode_flops, decode_traffic, prefill_flops
    from app.engine import protocol as P

    need = max(depths) + n_gen + n_prompt
    n_ctx = max(cfg.n_ctx, -(-need // 256) * 256)
    engine.load(P.LoadConfig(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, n_batch=cfg.n_batch,
                             n_ubatch=cfg.n_ubatch, n_gpu_layers=cfg.n_gpu_layers, type_k=cfg.type_k,
                             type_v=cfg.type_v, flash_attn=cfg.flash_attn, swa_full=cfg.swa_full))
    has_gpu = bool(engine.ready and engine.ready.gpu_offload)
    decode: list[DecodeSample] = []
    decode_depths: list[int] = []
    threads = 0
    for depth in depths:
        if progress:
            progress(f"decode tg{n_gen} at depth {depth}")
        res = engine.bench(P.Bench(request_id=engine.new_request_id("cal"), n_gen=n_gen, n_depth=depth,
                                   repetitions=repetitions if depth == 0 else max(2, repetitions - 1),
                                   warmup=depth == 0))
        threads = res.n_threads
        mean_depth = depth + (n_gen - 1) // 2
        bytes_tok = decode_traffic(info, cfg, mean_depth, has_gpu).total
        flops_tok = sum(decode_flops(info, cfg, mean_depth, has_gpu).values())
        decode += [DecodeSample(bytes_tok, n_gen / (ns / 1e9), flops_tok) for ns in res.samples_ns]
        decode_depths += [depth] * len(res.samples_ns)
    if progress:
        progress(f"prefill pp{n_prompt}")
    res = engine.bench(P.Bench(request_id=engine.new_request_id("cal"), n_prompt=n_prompt,
                               repetitions=repetitions))
    flops_tok = prefill_flops(info, n_prompt, 0)[0] / n_prompt
    prefill = [PrefillSample(flops_tok, n_prompt / (ns / 1e9)) for ns in res.samples_ns]
    return Measured(decode, decode_depths, prefill, threads, has_gpu)


def run(args: argparse.Namespace) -> int:
    from app.core import calibration
    from app.core.bandwidth import get_bandwidth
    from app.core.gguf_info import GGUFError, inspect_gguf
    from app.core.hardware import probe_hardware
    from app.core.memory import MemoryConfig
    from app.core.speed import T0_CPU, T0_GPU, default_rates, predict
    from app.engine.client import EngineClient, EngineError

    path = resolve_model(args.model)
    try:
        info = inspect_gguf(path)
    except GGUFError as exc:
        return fail(f"{path}: {exc}")
    hw = probe_hardware()
    bw = get_bandwidth(hw.machine_key)
    cfg = MemoryConfig(n_ctx=4096, n_gpu_layers=args.n_gpu_layers)
    depths = (0, args.depth) if args.depth > 0 else (0,)

    def say(msg: str) -> None:
        if not args.json:
            print(f"  {msg} ...", file=sys.stderr)

    try:
        with EngineClient() as engine:
            m = measure(engine, info, cfg, str(path), depths=depths, n_threads=args.threads, progress=say)
    except EngineError as exc:
        return fail(f"the engine failed: {exc}")
    backend = "gpu" if m.gpu_offload and args.n_gpu_layers else "cpu"
    before = default_rates(hw, bw)
    cal = calibration.calibrate(hw.machine_key, backend, m.decode, m.prefill,
                                t0_default=T0_GPU if backend == "gpu" else T0_CPU, n_threads=m.n_threads,
                                model=path.name, base=before.cpu if backend == "cpu" else before.gpu)
    calibration.store(cal)
    after = calibration.calibrated_rates(before, hw.machine_key, "cpu", "gpu")
    p0, p1 = predict(info, before, cfg, n_gen=32), predict(info, after, cfg, n_gen=32)
    measured_tg = sorted(s.tokens_per_s for s, d in zip(m.decode, m.decode_depths, strict=True) if d == 0)
    measured_pp = sorted(s.tokens_per_s for s in m.prefill)
    if args.json:
        print_json({"calibration": cal.to_dict(), "uncalibrated": p0.to_dict(), "calibrated": p1.to_dict(),
                    "measured_decode_tps": measured_tg, "measured_prefill_tps": measured_pp})
        return 0
    eta = cal.effective_bandwidth_gbs / bw.read_gbs if backend == "cpu" else None
    print(f"calibrated {backend} on {path.name} ({m.n_threads} threads):")
    print(f"  decode: effective bandwidth {cal.effective_bandwidth_gbs:.1f} GB/s"
          + (f" (η = {eta:.2f} of the measured {bw.read_gbs:.1f} GB/s)" if eta else "")
          + f", per-token overhead {cal.t0_s * 1000:.2f} ms" + ("" if cal.t0_fitted else " (default)")
          + (f", compute roof {cal.decode_gflops:.0f} GFLOP/s" if cal.decode_gflops else ""))
    print(f"  prefill: {cal.prefill_gflops:.1f} GFLOP/s effective")
    print(f"  decode tok/s: measured {measured_tg[len(measured_tg) // 2]:.1f}, "
          f"predicted {p0.decode_tps:.1f} before / {p1.decode_tps:.1f} after calibration")
    print(f"  prefill tok/s: measured {measured_pp[len(measured_pp) // 2]:.1f}, "
          f"predicted {p0.prefill_tps:.1f} before / {p1.prefill_tps:.1f} after calibration")
    print("stored for this machine: `roofline recommend` now labels its predictions 'calibrated'.")
    return 0
