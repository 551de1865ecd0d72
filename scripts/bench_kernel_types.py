"""The speed model's per-type kernel factors measured (run it through scripts/bench_kernel_types).

`app.core.predict.rates` gives each ggml type two factors against the machine's float32 GEMM probe: decode
weights/s (DECODE_PER_GEMM) and prefill FLOP/s (PREFILL_PER_GEMM). This measures them for a type on a probe
file that uses the type as real models do, with random weights (zeros can be far from real speed: an MXFP4
block of zeros has a subnormal scale, and a zero router sends every token to the same experts), and prints
the factor that makes the speed model's prediction equal the measurement, solved with the other types at
their table values.

A reference type with a factor in the table (Q4_0, on `roofline calibrate`'s kernel probe) runs interleaved
with the others: its own solved factor over its table value says how this machine and its load differ from
the table's machine right now, and each measured type's factor is divided by it ("machine-corrected"), so
a busy moment slows both alike. On an x86 CPU without VNNI the solved factors are given as the table holds
them (for a VNNI CPU), through the type's NO_VNNI scale.

Probes: "mxfp4-moe" (gpt-oss-20b's layer, 6 layers, 32k vocabulary: its experts MXFP4, the rest Q8_0),
"q4_0" (the kernel probe). Prints one line per probe and test, then the factors; --save-json keeps the runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N_PROMPT, N_GEN = 256, 32


def probes() -> dict[str, tuple[Any, str, str]]:
    """name -> (zoo spec, zoo quantization, the type whose factors it measures)."""
    from app.core.bench.zoo import ZOO, kernel_probe

    moe = dataclasses.replace(ZOO["gpt-oss-20b"], key="gpt-oss-20b-6l-32k", n_layers=6, n_vocab=32768)
    return {"q4_0": (kernel_probe(), "Q4_0", "Q4_0"), "mxfp4-moe": (moe, "MXFP4", "MXFP4")}


def solve(info: Any, rates_for: Any, kind: str, measured_tps: float, gtype: str) -> float:
    """The factor of `gtype` (decode or prefill table) at which the prediction equals `measured_tps`."""
    from app.core.predict import rates as R
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import predict

    table = R.DECODE_PER_GEMM if kind == "tg" else R.PREFILL_PER_GEMM
    had = table.get(gtype)
    cfg = MemoryConfig(n_ctx=1024)
    lo, hi = 0.005, 20.0
    try:
        for _ in range(60):  # bisection on a log scale: the prediction rises with the factor
            mid = (lo * hi) ** 0.5
            table[gtype] = mid
            p = predict(info, rates_for(), cfg, depth=0, n_prompt=N_PROMPT, n_gen=N_GEN)
            got = p.decode_tps if kind == "tg" else p.prefill_tps
            lo, hi = (mid, hi) if got < measured_tps else (lo, mid)
    finally:
        if had is None:
            table.pop(gtype, None)
        else:
            table[gtype] = had
    return (lo * hi) ** 0.5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-r", "--rounds", type=int, default=3, help="interleaved rounds over the probes (default 3)")
    ap.add_argument("--save-json", type=Path)
    args = ap.parse_args()

    from app.core.bench.zoo import zoo_path
    from app.core.gguf.info import inspect_gguf
    from app.core.predict import rates as R
    from app.core.predict.bandwidth import measure_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.speed import Rates, default_rates
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    hw = probe_hardware()
    bw = measure_bandwidth(threads=args.threads)
    vnni = R.has_vnni(hw)

    def rates_for() -> Rates:
        return Rates(default_rates(hw, bw, threads=args.threads).cpu, None)

    runs: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="roofline-kernels-") as tmp:
        files = {name: zoo_path(spec, quant, Path(tmp), random_weights=True)
                 for name, (spec, quant, _t) in probes().items()}
        infos = {name: inspect_gguf(path) for name, path in files.items()}
        with EngineClient() as engine:
            for rnd in range(args.rounds):
                for name, path in files.items():
                    engine.load(P.LoadConfig(model_path=str(path), n_ctx=1024, n_threads=args.threads))
                    got = runs.setdefault(name, {"tg": [], "pp": []})
                    res = engine.bench(P.Bench(request_id=engine.new_request_id("t"), n_gen=N_GEN, repetitions=2,
                                               warmup=True))
                    got["tg"] += [N_GEN / (ns / 1e9) for ns in res.samples_ns]
                    res = engine.bench(P.Bench(request_id=engine.new_request_id("p"), n_prompt=N_PROMPT,
                                               repetitions=2, warmup=False))
                    got["pp"] += [N_PROMPT / (ns / 1e9) for ns in res.samples_ns]
                    print(f"round {rnd + 1}/{args.rounds} {name}: tg{N_GEN} {statistics.fmean(got['tg']):.2f}, "
                          f"pp{N_PROMPT} {statistics.fmean(got['pp']):.2f} tok/s", flush=True)
    print(f"\ndate: {datetime.now(UTC):%Y-%m-%dT%H:%M}+00:00; {args.threads} thread(s); load average "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}; probes: read {bw.read_gbs:.1f} GB/s, float32 GEMM "
          f"{bw.gemm_gflops:.0f} GFLOP/s; VNNI: {'yes' if vnni else 'no (factors given for a VNNI CPU)'}")
    solved = {(name, kind): solve(infos[name], rates_for, kind, statistics.median(runs[name][kind]), gtype)
              for name, (_s, _q, gtype) in probes().items() for kind in ("tg", "pp")}
    print("\n| probe | type | test | measured tok/s | solved factor | table | machine-corrected |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, kind), factor in solved.items():
        gtype = probes()[name][2]
        table = (R.DECODE_PER_GEMM if kind == "tg" else R.PREFILL_PER_GEMM).get(gtype)
        ref = solved[("q4_0", kind)] / (R.DECODE_PER_GEMM if kind == "tg" else R.PREFILL_PER_GEMM)["Q4_0"]
        print(f"| {name} | {gtype} | {kind} | {statistics.median(runs[name][kind]):.2f} | {factor:.3f} | "
              f"{table if table is not None else 'none'} | {factor / ref:.3f} |")
    if args.save_json:
        args.save_json.write_text(json.dumps({"runs": runs, "read_gbs": bw.read_gbs, "gemm_gflops": bw.gemm_gflops,
                                              "solved": {f"{n}:{k}": v for (n, k), v in solved.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
