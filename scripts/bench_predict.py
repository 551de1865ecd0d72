"""Predicted vs measured speed, in one run (run it through scripts/bench_predict).

1. measures memory bandwidth (and the float32 GEMM yardstick) afresh;
2. calibration runs through the engine on the default model: tg32 at depth 0 and 1024, pp256;
3. evaluation runs, measured separately: pp512 and tg128 (llama-bench style, mean of repetitions) on
   the default model and, to check that a calibration transfers, on a synthetic 8-layer Q8_0 model
   of a different size and shape;
4. prints predicted/measured ratios, uncalibrated and calibrated.
Targets: calibrated decode within ±10 %, prefill within ±25 %; uncalibrated within ±35 %.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--no-cross", action="store_true", help="skip the second (synthetic) model")
    ap.add_argument("-t", "--threads", type=int, default=None)
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="roofline-bench-")
    from app.core.default_model import default_model_path

    default = default_model_path()  # resolve before ROOFLINE_HOME moves the models directory
    os.environ["ROOFLINE_HOME"] = home
    os.environ["ROOFLINE_DEFAULT_MODEL"] = str(default)

    from app.commands.calibrate import measure
    from app.core import calibration
    from app.core.bandwidth import get_bandwidth
    from app.core.gguf_info import inspect_gguf
    from app.core.hardware import probe_hardware
    from app.core.memory import MemoryConfig
    from app.core.speed import T0_CPU, default_rates, predict
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    t_start = time.perf_counter()
    hw = probe_hardware()
    bw = get_bandwidth(hw.machine_key, remeasure=True)
    print(f"machine: {hw.cpu.model}, {hw.cpu.physical_cores} cores, {(hw.ram_total or 0) / 2**30:.0f} GiB, "
          f"load average {os.getloadavg()[0]:.1f}")
    if os.getloadavg()[0] > (hw.cpu.logical_cores or 1):
        print("WARNING: the machine is busy (load average above the core count): timings are unreliable")
    print(f"bandwidth: read {bw.read_gbs:.1f} GB/s, copy {bw.copy_gbs:.1f} GB/s ({bw.threads} threads); "
          f"float32 GEMM {bw.gemm_gflops:.0f} GFLOP/s")

    models = [("gemma-3-270m Q4_K_M", default)]
    if not args.no_cross:
        from synth_gguf import write_synthetic_gguf

        synth = write_synthetic_gguf(Path(home) / "synth-q8.gguf", n_layers=8, n_embd=1024, n_ff=4096, n_head=8,
                                     n_head_kv=4, n_vocab=4096, n_ctx=4096, tensor_type="Q8_0")
        models.append(("synthetic 8L Q8_0", synth))

    cfg = MemoryConfig(n_ctx=2048)
    rows = []
    with EngineClient() as engine:
        info = inspect_gguf(default)
        m = measure(engine, info, cfg, str(default), n_gen=32, n_prompt=256, depths=(0, 1024),
                    repetitions=args.repetitions, n_threads=args.threads,
                    progress=lambda s: print(f"  calibration: {s}", file=sys.stderr))
        unc = default_rates(hw, bw)
        cal = calibration.calibrate(hw.machine_key, "cpu", m.decode, m.prefill, T0_CPU, m.n_threads, default.name,
                                    base=unc.cpu)
        print(f"calibration on {default.name} ({m.n_threads} threads): effective bandwidth "
              f"{cal.effective_bandwidth_gbs:.2f} GB/s (η = {cal.effective_bandwidth_gbs / bw.read_gbs:.2f}), "
              f"t0 {cal.t0_s * 1000:.2f} ms{' (fitted)' if cal.t0_fitted else ' (default)'}, "
              f"decode compute roof {cal.decode_gflops:.1f} GFLOP/s, prefill {cal.prefill_gflops:.1f} GFLOP/s")
        calibrated = calibration.Rates(calibration.apply(unc.cpu, cal), None)

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

    print()
    print(f"{'model':<22} {'test':<6} {'measured tok/s':>16} {'uncalibrated':>18} {'calibrated':>18}")
    for label, test, _kind, meas, spread, pu, pc in rows:
        print(f"{label:<22} {test:<6} {meas:>9.1f} ±{spread * 100:>4.1f}% {pu:>9.1f} ({pu / meas:4.2f}x) "
              f"{pc:>9.1f} ({pc / meas:4.2f}x)")
    print()
    targets = {"decode": 0.10, "prefill": 0.25}
    ok = True
    for label, test, kind, meas, _s, pu, pc in rows:
        cal_err, unc_err = pc / meas - 1, pu / meas - 1
        cal_ok, unc_ok = abs(cal_err) <= targets[kind], abs(unc_err) <= 0.35
        ok &= cal_ok and unc_ok
        print(f"{label} {test}: calibrated {cal_err:+.0%} (target ±{targets[kind]:.0%}: "
              f"{'ok' if cal_ok else 'MISSED'}), uncalibrated {unc_err:+.0%} (target ±35%: "
              f"{'ok' if unc_ok else 'MISSED'})")
    print(f"\n(calibrated on {default.name} only; the synthetic model checks that it transfers) "
          f"total {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
