"""Predicted vs measured speed, out of sample, in one run (run it through scripts/bench_predict).

1. measures memory bandwidth (and the float32 GEMM yardstick) afresh;
2. calibrates on ONE model (default: the embedded one; `--calibrate-on zoo-key:QUANT` picks another):
   tg32 at depth 0 and 1024, pp256;
3. evaluates on OTHER models the calibration never saw (zoo models of real shapes, written as sparse
   files, and a synthetic 8-layer Q8_0 model): pp512 and tg128, llama-bench style;
4. prints predicted/measured ratios, uncalibrated and calibrated, worst last.
This is the honest test of a calibration: it must transfer to shapes and quantizations it was not fitted
on. `roofline calibrate` itself fits on several shapes (see scripts/bench_zoo for that, on the whole zoo).
The calibration is kept in a temporary ROOFLINE_HOME: the user's stored one is not touched.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

EVALUATE = ["qwen2.5-0.5b:Q4_K_M", "llama-3.2-1b:Q4_K_M", "llama-3.2-1b:Q8_0", "llama-3.2-3b:Q4_K_M"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--calibrate-on", default="default", help="'default' or a zoo key:QUANT")
    ap.add_argument("--evaluate", nargs="*", default=EVALUATE, help="zoo key:QUANT models to evaluate on")
    ap.add_argument("--no-synthetic", action="store_true", help="skip the synthetic 8-layer Q8_0 model")
    ap.add_argument("-t", "--threads", type=int, default=None)
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="roofline-bench-")
    from app.core.models.default_model import default_model_path

    default = default_model_path()  # resolve before ROOFLINE_HOME moves the models directory
    os.environ["ROOFLINE_HOME"] = home
    os.environ["ROOFLINE_DEFAULT_MODEL"] = str(default)

    from app.commands.calibrate import measure
    from app.core.bench.zoo import ZOO, zoo_path
    from app.core.gguf.info import inspect_gguf
    from app.core.predict import calibration
    from app.core.predict.bandwidth import get_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import Rates, default_rates, predict
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    t_start = time.perf_counter()
    hw = probe_hardware()
    bw = get_bandwidth(hw.machine_key, remeasure=True, threads=args.threads)  # probes at the runs' threads
    print(f"machine: {hw.cpu.model}, {hw.cpu.physical_cores} cores, {(hw.ram_total or 0) / 2**30:.0f} GiB, "
          f"load average {os.getloadavg()[0]:.1f}")
    if os.getloadavg()[0] > (hw.cpu.logical_cores or 1):
        print("WARNING: the machine is busy (load average above the core count): timings are unreliable")
    print(f"bandwidth: read {bw.read_gbs:.1f} GB/s, one thread {bw.read_gbs_1t:.1f}, copy {bw.copy_gbs:.1f} GB/s "
          f"({bw.threads} threads); "
          f"float32 GEMM {bw.gemm_gflops:.0f} GFLOP/s")

    zoo_dir = Path(home) / "zoo"

    def resolve(name: str) -> tuple[str, Path]:
        if name == "default":
            return "gemma-3-270m Q4_K_M (default)", default
        key, quant = name.split(":")
        return f"{ZOO[key].name} {quant}", zoo_path(key, quant, zoo_dir)

    cal_label, cal_path = resolve(args.calibrate_on)
    models = [resolve(m) for m in args.evaluate if m != args.calibrate_on]
    if args.calibrate_on != "default":
        models.insert(0, resolve("default"))
    if not args.no_synthetic:
        from synth_gguf import write_synthetic_gguf

        synth = write_synthetic_gguf(Path(home) / "synth-q8.gguf", n_layers=8, n_embd=1024, n_ff=4096, n_head=8,
                                     n_head_kv=4, n_vocab=4096, n_ctx=4096, tensor_type="Q8_0")
        models.append(("synthetic 8L Q8_0", synth))

    cfg = MemoryConfig(n_ctx=2048)
    unc = default_rates(hw, bw, threads=args.threads)  # the runs' threads (None: llama.cpp's default)
    unc = Rates(unc.cpu, None)
    rows = []
    with EngineClient() as engine:
        info = inspect_gguf(cal_path)
        m = measure(engine, info, cfg, str(cal_path), unc, n_gen=32, n_prompt=256, depths=(0, 1024),
                    repetitions=args.repetitions, n_threads=args.threads,
                    progress=lambda s: print(f"  calibration: {s}", file=sys.stderr), label=cal_label)
        cal = calibration.calibrate(hw.machine_key, "cpu", m.samples, unc.cpu, unc.cpu.threads)
        print(f"calibration on {cal_label} only ({m.n_threads} threads): effective bandwidth "
              f"{cal.effective_bandwidth_gbs:.2f} GB/s, decode kernels x{cal.decode_scale:.2f}, t0 "
              f"{cal.t0_s * 1000:.2f} ms{' (fitted)' if cal.t0_fitted else ' (default)'}, prefill kernels "
              f"x{cal.prefill_scale:.2f}")
        calibrated = Rates(calibration.apply(unc.cpu, cal), None)

        for label, path in models:
            info = inspect_gguf(path)
            engine.load(P.LoadConfig(model_path=str(path), n_ctx=2048, n_threads=args.threads))
            for n_prompt, n_gen in ((512, 0), (0, 128)):
                print(f"  measuring {label} {'pp' if n_prompt else 'tg'}{n_prompt or n_gen} ...", file=sys.stderr)
                res = engine.bench(P.Bench(request_id=engine.new_request_id("bp"), n_prompt=n_prompt, n_gen=n_gen,
                                           repetitions=args.repetitions))
                n = n_prompt or n_gen
                tps = [n / (ns / 1e9) for ns in res.samples_ns]
                measured = statistics.fmean(tps)
                pu = predict(info, unc, cfg, depth=0, n_prompt=n_prompt or 512, n_gen=n_gen or 1)
                pc = predict(info, calibrated, cfg, depth=0, n_prompt=n_prompt or 512, n_gen=n_gen or 1)
                kind = "prefill" if n_prompt else "decode"
                pred_u = pu.prefill_tps if n_prompt else pu.decode_tps
                pred_c = pc.prefill_tps if n_prompt else pc.decode_tps
                spread = statistics.stdev(tps) / measured if len(tps) > 1 else 0.0
                rows.append((label, f"{'pp' if n_prompt else 'tg'}{n}", kind, measured, spread, pred_u, pred_c))

    rows.sort(key=lambda r: abs(r[6] / r[3] - 1))
    print()
    print(f"{'model (out of sample)':<30} {'test':<6} {'measured tok/s':>16} {'uncalibrated':>18} {'calibrated':>18}")
    for label, test, _kind, meas, spread, pu, pc in rows:
        print(f"{label:<30} {test:<6} {meas:>9.1f} ±{spread * 100:>4.1f}% {pu:>9.1f} ({pu / meas:4.2f}x) "
              f"{pc:>9.1f} ({pc / meas:4.2f}x)")
    print()
    targets = {"decode": 0.15, "prefill": 0.25}
    ok = True
    for label, test, kind, meas, _s, pu, pc in rows:
        cal_err, unc_err = pc / meas - 1, pu / meas - 1
        cal_ok, unc_ok = abs(cal_err) <= targets[kind], abs(unc_err) <= 0.35
        ok &= cal_ok and unc_ok
        print(f"{label} {test}: calibrated {cal_err:+.0%} (target ±{targets[kind]:.0%}: "
              f"{'ok' if cal_ok else 'MISSED'}), uncalibrated {unc_err:+.0%} (target ±35%: "
              f"{'ok' if unc_ok else 'MISSED'})")
    print(f"\n(calibrated on {cal_label} only; every model above is out of sample) "
          f"total {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
