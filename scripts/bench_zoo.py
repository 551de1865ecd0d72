"""Predicted vs measured speed and memory on the model zoo, in one run (run it through scripts/bench_zoo).

For every zoo model that fits this machine's RAM (others are skipped with the reason), written as a sparse
GGUF in a temporary directory: measured pp512 and tg128 (llama-bench style, through the engine; fewer
repetitions for the big ones) against the speed model, uncalibrated and calibrated, as ratios with the worst
case last; and llama.cpp's own buffer sizes against the memory estimate for f16, q8_0 and q4_0 KV caches.

The calibration is measured in the same run, interleaved: half of its runs before the evaluation models and
half after, so a machine whose load drifts during the run affects both alike. It uses three zoo shapes: the
two of `roofline calibrate` (Llama-3.2-1B in Q6_K and Q4_K_M) and Llama-3.2-3B Q4_K_M (28 wider layers), not
the default model and no Q8_0/Q5_0 file for decode — zoo files hold zero weights, and zeros decode faster
than real weights in those two types (1.29x and 1.3-1.4x, one thread; Q4_K and Q6_K the same;
docs/estimates.md), so a zoo evaluation is calibrated on types where the zoo behaves like real models —
plus `roofline calibrate`'s kernel probes (a 4-layer model of Llama-3.2-1B's width in Q8_0 and Q4_0 with random
weights, "probe:Q8_0"), which give those types' kernels their own scales; the evaluation files in those two
types get random weights too, like a real model's (marked "random weights"), and so does every mixture of
experts: a zero router sends every token to the same few experts (a prompt batch then runs them as one big
product instead of many small ones), and a zero MXFP4 block has a subnormal scale (decode 1.5x slower).
Models in that set are marked "(cal)" in the table, all others are out of sample. It lives in a temporary
ROOFLINE_HOME: the user's stored calibration is untouched.
The predictions are for the thread count the runs used (`-t`; default: llama.cpp's, the physical cores),
from probes measured with that many threads.

`--depth` checks decode speed at depth instead (scripts/bench_zoo_depth.py: three small shapes, tok/s at depth
D over tok/s at 0 against the speed model's drop, up to 16k).
`--save-json FILE` keeps the measurements (probes, every run's tok/s, llama.cpp's buffers); `--replay FILE`
prints the same report from such a file with the current speed model, without measuring anything.
Targets (issue 13): calibrated decode within ±15 % for every zoo model of 1B parameters or more, prefill
within ±25 %; uncalibrated decode within ±35 %; memory within 2 % of llama.cpp's buffers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.gguf.kv_types import KV_TYPES  # the offered KV cache types, most exact first  # noqa: E402 - after sys.path points at this checkout

# (zoo key, quant) evaluated by default: every model in the Q4_K_M mix, and the small ones in other types
EVALUATION = [
    ("llama-3.2-1b", "Q4_K_M"), ("gemma-2-2b", "Q4_K_M"), ("llama-3.2-3b", "Q4_K_M"), ("olmoe-1b-7b", "Q4_K_M"),
    ("qwen2.5-7b", "Q4_K_M"), ("mistral-7b", "Q4_K_M"), ("llama-3.1-8b", "Q4_K_M"),
    ("qwen2.5-0.5b", "Q4_K_M"), ("llama-3.2-1b", "Q4_0"), ("llama-3.2-1b", "Q6_K"), ("llama-3.2-1b", "Q8_0"),
    ("qwen2.5-0.5b", "Q8_0"), ("qwen2.5-0.5b", "F16"),
    # the 2025-26 generation, each in the quantization its releases use (ZooSpec.release)
    ("gpt-oss-20b", "MXFP4"), ("qwen3-30b-a3b", "Q4_K_M"), ("qwen3-8b", "Q4_K_M"), ("gemma-3-4b", "Q4_K_M"),
    ("lfm2-1.2b", "Q8_0"), ("granite-4.0-h-micro", "Q4_K_M"),
]  # the models the targets are about first, then the other quantizations (a busy machine may not reach them)
MIN_LAYERS = 4  # a model too big for the RAM is measured on its first layers (at least this many), said so
RAM_SHARE = 0.8  # use at most this share of the RAM available now (others share the machine)
CAL_CTX, CAL_GEN, CAL_PROMPT = 2048, 32, 256  # the calibration runs (as `roofline calibrate` measures)
BENCH_CALIBRATION_EXTRA = ("llama-3.2-3b:Q4_K_M",)  # with `roofline calibrate`'s zoo shapes: three shapes


def _cut(name: str) -> tuple[str, int | None]:
    """"key@N:QUANT" (a model measured on its first N layers) -> ("key:QUANT", N); otherwise (name, None)."""
    head, _, quant = name.partition(":")
    key, _, layers = head.partition("@")
    return (f"{key}:{quant}", int(layers)) if layers else (name, None)


def _model_path(name: str, zoo_dir: Path, default: Path, sparse: bool = False) -> Path:
    """The file of a calibration or evaluation model: the kernel probes ("probe:Q8_0") and the evaluation
    files in their types get random weights, as `roofline calibrate`'s probes do (zeros decode Q8_0 faster
    than real weights); the rest stay sparse zeros (Q4_K and Q6_K decode alike on both)."""
    import dataclasses

    from app.commands.calibrate import KERNEL_PROBES
    from app.core.bench.zoo import ZOO, kernel_probe, zoo_path

    if name == "default":
        return default
    whole, layers = _cut(name)
    key, quant = whole.split(":")
    spec = kernel_probe() if key == "probe" else ZOO[key]
    if layers is not None:  # the same shape, fewer layers: its own file name
        spec = dataclasses.replace(spec, key=f"{key}-{layers}l", n_layers=layers,
                                   attn_layers=tuple(il for il in spec.attn_layers if il < layers))
    # a MoE's zeros route every token to the same experts (and MXFP4's zero scale is subnormal): random weights
    random = not sparse and (quant in KERNEL_PROBES or bool(spec.n_expert))
    return zoo_path(spec, quant, zoo_dir, random_weights=random)


def measure_all(args: argparse.Namespace, default: Path, zoo_dir: Path) -> dict[str, Any]:
    """Run the calibration (two halves) and the zoo; every number the report needs, as plain data."""
    import psutil

    from app.commands.calibrate import CALIBRATION_ZOO, KERNEL_PROBES
    from app.core.bench.zoo import ZOO
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.bandwidth import get_bandwidth, measure_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.memory import MemoryConfig, MiB, estimate_memory
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    t_start = time.perf_counter()
    hw = probe_hardware()
    data: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="minutes"), "load_before": list(os.getloadavg()),
        "machine": f"{hw.cpu.model}, {hw.cpu.logical_cores} logical cores, {(hw.ram_total or 0) / 2**30:.0f} GiB "
                   f"({psutil.virtual_memory().available / 2**30:.1f} GiB available)",
        "cpus_allowed": len(os.sched_getaffinity(0)), "isolated": os.environ.get("ROOFLINE_BENCH_ISOLATE") == "1",
        "calibration": [], "runs": [], "memory": [], "skipped": [], "n_threads": args.threads,
        "random_weights": list(KERNEL_PROBES),  # the quantizations whose evaluation files are not zeros
        "random_weights_moe": True,  # nor are any mixture of experts' files
    }
    # the probes with the thread count the runs use (all cores this process may use when not given)
    bw = get_bandwidth(hw.machine_key, remeasure=True, threads=args.threads or data["cpus_allowed"])
    data["probes"] = {"read_gbs": bw.read_gbs, "gemm_gflops": bw.gemm_gflops, "threads": bw.threads,
                      "read_gbs_1t": getattr(bw, "read_gbs_1t", 0.0), "gemm_gflops_1t": bw.gemm_gflops_1t}

    def say(msg: str) -> None:
        print(f"  {msg} ...", file=sys.stderr, flush=True)

    cal_names = [*BENCH_CALIBRATION_EXTRA, *(f"{k}:{q}" for k, q in CALIBRATION_ZOO)]
    probe_names = [f"probe:{q}" for q in KERNEL_PROBES]  # as `roofline calibrate`: random weights

    def calibration_round(engine: EngineClient, which: str) -> None:
        for name in cal_names + probe_names:
            path = _model_path(name, zoo_dir, default)
            first = name == cal_names[0]  # decoded at a depth too (attention over a filled cache)
            engine.load(P.LoadConfig(model_path=str(path), n_ctx=CAL_CTX + (1024 if first else 0),
                                     n_threads=args.threads))
            for depth in (0, 512) if first else (0,):
                say(f"calibration {which}: {name} tg{CAL_GEN} at depth {depth}")
                res = engine.bench(P.Bench(request_id=engine.new_request_id("cal"), n_gen=CAL_GEN, n_depth=depth,
                                           repetitions=1, warmup=depth == 0))
                data["n_threads_used"] = res.n_threads
                for ns in res.samples_ns:
                    data["calibration"].append({"model": name, "kind": "decode", "depth": depth,
                                                "tps": CAL_GEN / (ns / 1e9), "half": which})
            res = engine.bench(P.Bench(request_id=engine.new_request_id("cal"), n_prompt=CAL_PROMPT, repetitions=1,
                                       warmup=False))  # warmed up decoding
            for ns in res.samples_ns:
                data["calibration"].append({"model": name, "kind": "prefill", "depth": 0,
                                            "tps": CAL_PROMPT / (ns / 1e9), "half": which})
            last = data["calibration"][-1]
            print(f"calibration {which}: {name}: ... prefill {last['tps']:.1f} tok/s", flush=True)

    with EngineClient() as engine:
        calibration_round(engine, "1/2")
        reserve = time.perf_counter() - t_start  # the closing calibration round takes about as long
        measured: list[tuple[str, Path, Any]] = []
        for key, quant in args.wanted:
            spec = ZOO[key]
            name = f"{key}:{quant}"
            shape = _model_path(name, zoo_dir, default, sparse=True)  # read for its size: random weights later
            label = f"{spec.name} {quant}"
            est = estimate_memory(inspect_gguf(shape), MemoryConfig(n_ctx=4096), has_gpu=False)
            avail = psutil.virtual_memory().available
            layers = int(spec.n_layers * RAM_SHARE * avail / est.cpu.total * 0.9)  # the layers that fit, roughly
            if est.cpu.total > RAM_SHARE * avail and layers >= MIN_LAYERS:
                name = f"{key}@{layers}:{quant}"  # per-layer costs are what the speed model is checked on
                label = f"{spec.name} {quant} (first {layers} of {spec.n_layers} layers)"
            path = _model_path(name, zoo_dir, default)
            if path != shape:
                shape.unlink()  # disk: the zoo's big files are written whole
            info = inspect_gguf(path)
            est = estimate_memory(info, MemoryConfig(n_ctx=4096), has_gpu=False)
            if est.cpu.total > RAM_SHARE * avail:
                data["skipped"].append(f"{label}: needs {est.cpu.total / 2**30:.1f} GiB (weights, repacked copy, KV, "
                                       f"compute), {avail / 2**30:.1f} GiB available now")
                continue
            if time.perf_counter() - t_start + reserve > args.budget_s:
                data["skipped"].append(f"{label}: time budget of {args.budget_s:.0f} s spent")
                continue
            big = info.tensor_bytes > 2e9
            reps = 1 if big else args.repetitions
            say(f"{label}: load")
            loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=4096, n_threads=args.threads))
            data["memory"].append({"model": name, "kv": "f16", "estimated_mib": est.cpu.total / MiB,
                                   "llama_mib": sum(loaded.buffers_mib.values())})
            if big:  # page the weights in and start the threads without a full extra run
                engine.bench(P.Bench(request_id=engine.new_request_id("w"), n_gen=4, repetitions=1, warmup=False))
            for n_prompt, n_gen in ((512, 0), (0, 128)):
                test = "pp512" if n_prompt else "tg128"
                say(f"{label}: {test} x{reps}")
                res = engine.bench(P.Bench(request_id=engine.new_request_id("z"), n_prompt=n_prompt, n_gen=n_gen,
                                           repetitions=reps, warmup=not big))
                tps = [(n_prompt or n_gen) / (ns / 1e9) for ns in res.samples_ns]
                data["runs"].append({"model": name, "test": test, "tps": tps,
                                     "load": os.getloadavg()[0]})
                print(f"measured {label} {test}: {statistics.fmean(tps):.2f} tok/s", flush=True)
            measured.append((name, path, info))
        calibration_round(engine, "2/2")
        # the probes again: another program's burst of memory traffic during the first reading leaves it low
        # (6.5 against 18 GB/s, minutes apart, on a shared machine); the faster of the two is the machine's, as
        # `roofline`'s stored record keeps the quiet reading (bandwidth.get_bandwidth)
        again = measure_bandwidth(threads=args.threads or data["cpus_allowed"])
        first = dict(data["probes"])
        data["probes_first"] = first
        data["probes_last"] = {"read_gbs": again.read_gbs, "gemm_gflops": again.gemm_gflops,
                               "read_gbs_1t": again.read_gbs_1t, "gemm_gflops_1t": again.gemm_gflops_1t}
        for k, v in data["probes_last"].items():
            data["probes"][k] = max(first.get(k) or 0.0, v or 0.0)
        # memory does not depend on the machine's load: the other KV types after the timed runs
        for name, path, info in measured if not args.no_memory else []:
            for kv in KV_TYPES[1:]:
                say(f"{name}: memory with a {kv} KV cache")
                ld = engine.load(P.LoadConfig(model_path=str(path), n_ctx=4096, type_k=kv, type_v=kv,
                                              n_threads=args.threads, warmup=False))
                est = estimate_memory(info, MemoryConfig(n_ctx=4096, type_k=kv, type_v=kv), has_gpu=False)
                data["memory"].append({"model": name, "kv": kv, "estimated_mib": est.cpu.total / MiB,
                                       "llama_mib": sum(ld.buffers_mib.values())})
    data["load_after"] = list(os.getloadavg())
    data["seconds"] = time.perf_counter() - t_start
    return data


def report(data: dict[str, Any], default: Path, zoo_dir: Path) -> bool:
    """Print the tables and the targets' verdicts from measured data with the current speed model."""
    from app.core.bench.zoo import ZOO
    from app.core.gguf.info import inspect_gguf
    from app.core.predict import calibration
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.calibration import Sample
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import Rates, cost_parts, default_rates, predict

    pr = data["probes"]
    threads = data.get("n_threads_used") or data.get("n_threads") or pr["threads"]
    lb, la = data["load_before"], data.get("load_after", [0, 0, 0])
    print(f"date: {data['date']}; machine: {data['machine']}; "
          f"{'isolated on one CPU' if data.get('isolated') else 'not isolated'}; {threads} llama.cpp thread(s)")
    print(f"load average before {lb[0]:.2f} / {lb[1]:.2f} / {lb[2]:.2f}, after {la[0]:.2f} / {la[1]:.2f} / "
          f"{la[2]:.2f} (1/5/15 min)")
    if data.get("probes_first"):
        a, b = data["probes_first"], data["probes_last"]
        print(f"probes at the start: read {a['read_gbs']:.1f} GB/s, GEMM {a['gemm_gflops']:.0f} GFLOP/s; at the end: "
              f"{b['read_gbs']:.1f} GB/s, {b['gemm_gflops']:.0f} GFLOP/s; the faster of each is used")
    print(f"probes ({pr['threads']} thread(s)): read {pr['read_gbs']:.1f} GB/s"
          + (f" (one thread {pr['read_gbs_1t']:.1f})" if pr.get("read_gbs_1t") else "")
          + f", float32 GEMM {pr['gemm_gflops']:.0f} GFLOP/s"
          + (f" (one core {pr['gemm_gflops_1t']:.0f})" if pr.get("gemm_gflops_1t") else ""))
    bw = BandwidthResult(read_gbs=pr["read_gbs"], copy_gbs=0.0, threads=pr["threads"], buffer_bytes=0, runs=0,
                         seconds=0.0, measured_at=data["date"], gemm_gflops=pr["gemm_gflops"])
    if pr.get("read_gbs_1t"):
        bw.read_gbs_1t = pr["read_gbs_1t"]
    bw.gemm_gflops_1t = pr.get("gemm_gflops_1t", 0.0)  # older runs: scaled from the all-core probe
    unc = default_rates(probe_hardware(), bw, threads=threads)
    unc = Rates(unc.cpu, None)
    infos: dict[str, Any] = {}

    def info_of(name: str) -> Any:
        # its header is all a report reads: sparse, never the random-weight copy (GBs written per replay)
        if name not in infos:
            infos[name] = inspect_gguf(_model_path(name, zoo_dir, default, sparse=True))
        return infos[name]

    samples = []
    cfg_cal = MemoryConfig(n_ctx=CAL_CTX)
    for c in data["calibration"]:
        info = info_of(c["model"])
        if c["kind"] == "decode":
            parts = cost_parts(info, unc, cfg_cal, depth=c["depth"] + (CAL_GEN - 1) // 2)["cpu"]
            samples.append(Sample("decode", c["tps"], 1, parts, c["model"], c["depth"],
                                  c["model"].startswith("probe:")))
        else:
            samples.append(Sample("prefill", c["tps"], CAL_PROMPT,
                                  cost_parts(info, unc, cfg_cal, n_prompt=CAL_PROMPT)["cpu"],
                                  c["model"], probe=c["model"].startswith("probe:")))
    cal = calibration.calibrate("bench", "cpu", samples, unc.cpu, n_threads=threads)
    calibrated = Rates(calibration.apply(unc.cpu, cal), None)
    print(f"calibration ({len(samples)} runs on {', '.join(cal.models)}): effective bandwidth "
          f"{cal.effective_bandwidth_gbs:.1f} GB/s, decode kernels x{cal.decode_scale:.2f}"
          + "".join(f" ({t} x{v:.2f})" for t, v in sorted(cal.decode_type_scales.items())) + ", prefill kernels "
          f"x{cal.prefill_scale:.2f}" + "".join(f" ({t} x{v:.2f})" for t, v in sorted(cal.prefill_type_scales.items()))
          + f", per layer {cal.t_layer_s * 1e6:.0f} µs, fit error {cal.fit_error * 100:.0f} % rms")
    for c in data["calibration"]:
        print(f"  calibration {c['half']}: {c['model']} {c['kind']} depth {c['depth']}: {c['tps']:.1f} tok/s")
    cal_set = {c["model"] for c in data["calibration"]}
    cfg = MemoryConfig(n_ctx=4096)
    table = []
    for r in data["runs"]:
        info, (key, quant) = info_of(r["model"]), _cut(r["model"])[0].split(":")
        layers = _cut(r["model"])[1]
        meas = statistics.fmean(r["tps"])
        spread = statistics.stdev(r["tps"]) / meas if len(r["tps"]) > 1 else 0.0
        pu, pc = (predict(info, rates, cfg, n_prompt=512, n_gen=128) for rates in (unc, calibrated))
        pick = (lambda p: p.prefill_tps) if r["test"] == "pp512" else (lambda p: p.decode_tps)
        label = (f"{ZOO[key].name} {quant}" + (f" (first {layers} layers)" if layers else "")
                 + (" random weights" if quant in data.get("random_weights", [])
                    or (data.get("random_weights_moe") and ZOO[key].n_expert) else "")
                 + (" (cal)" if r["model"] in cal_set else ""))
        table.append((label, ZOO[key].params_b, r["test"], meas, spread, pick(pu), pick(pc),
                      pc.decode_bound if r["test"] == "tg128" else ""))
    print("\n| model | test | measured tok/s | uncalibrated | calibrated | decode bound (calibrated) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, _p, test, meas, spread, pu, pc, bound in sorted(table, key=lambda r: abs(r[6] / r[3] - 1)):
        print(f"| {label} | {test} | {meas:.1f} ± {spread * 100:.0f} % | {pu:.1f} ({pu / meas:.2f}x) | "
              f"{pc:.1f} ({pc / meas:.2f}x) | {bound} |")
    print()
    ok, target = True, {"tg128": 0.15, "pp512": 0.25}
    for label, params_b, test, meas, _s, pu, pc, _b in table:
        if params_b < 1.0 and "(cal)" not in label:
            continue
        if abs(pc / meas - 1) > target[test] or (test == "tg128" and abs(pu / meas - 1) > 0.35):
            ok = False
            print(f"MISSED: {label} {test}: calibrated {pc / meas - 1:+.0%} (target ±{target[test]:.0%}), "
                  f"uncalibrated {pu / meas - 1:+.0%}" + (" (target ±35%)" if test == "tg128" else ""))
    if data["memory"]:
        print("\n| model | KV | estimated MiB | llama.cpp buffers MiB | ratio |\n| --- | --- | --- | --- | --- |")
        ordered = sorted(data["memory"], key=lambda m: abs(m["estimated_mib"] / m["llama_mib"] - 1))
        for m in ordered:
            (key, quant), layers = _cut(m["model"])[0].split(":"), _cut(m["model"])[1]
            cut = f" ({layers} layers)" if layers else ""
            print(f"| {ZOO[key].name} {quant}{cut} | {m['kv']} | {m['estimated_mib']:.1f} | {m['llama_mib']:.1f} | "
                  f"{m['estimated_mib'] / m['llama_mib']:.3f} |")
            if abs(m["estimated_mib"] / m["llama_mib"] - 1) > 0.02:
                ok = False
                print(f"MISSED: memory {m['model']} {m['kv']} (target ±2%)")
    for s in data["skipped"]:
        print(f"skipped: {s}")
    print(f"\ntotal {data.get('seconds', 0):.0f} s; targets {'met' if ok else 'NOT all met'}")
    return ok


def main() -> int:
    if "--depth" in sys.argv[1:]:  # decode speed at depth: its own shapes and report (scripts/bench_zoo_depth.py)
        from bench_zoo_depth import run

        return run([a for a in sys.argv[1:] if a != "--depth"])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--repetitions", type=int, default=2, help="for models under 2 GB (big ones: 1)")
    ap.add_argument("--only", nargs="*", default=None, help="zoo keys (or key:QUANT) to evaluate")
    ap.add_argument("--no-memory", action="store_true", help="skip the KV-type memory loads")
    ap.add_argument("--zoo-dir", default=None, help="keep the sparse zoo files here (default: a temp dir)")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--budget-s", type=float, default=1800.0,
                    help="skip the remaining zoo models (said so) once this much time has gone, keeping time for "
                         "the closing calibration runs")
    ap.add_argument("--save-json", default=None, help="also write the measurements to this file")
    ap.add_argument("--replay", default=None, help="report from a --save-json file; measure nothing")
    args = ap.parse_args()
    args.wanted = [(k, q) for k, q in EVALUATION if not args.only or k in args.only or f"{k}:{q}" in args.only]

    from app.core.models.default_model import default_model_path

    default = default_model_path()  # resolve before ROOFLINE_HOME moves the models directory
    home = tempfile.mkdtemp(prefix="roofline-bench-")
    os.environ["ROOFLINE_HOME"] = home
    os.environ["ROOFLINE_DEFAULT_MODEL"] = str(default)
    # its own zoo files go when it ends: the random-weight ones are real data (~30 GB for the whole zoo)
    temporary = [home] if args.zoo_dir else [home, tempfile.mkdtemp(prefix="roofline-zoo-")]
    try:
        return _run(args, default, Path(args.zoo_dir or temporary[-1]))
    finally:
        for d in temporary:
            shutil.rmtree(d, ignore_errors=True)


def _run(args: argparse.Namespace, default: Path, zoo_dir: Path) -> int:
    if args.replay:
        try:
            data = json.loads(Path(args.replay).read_text())
        except (OSError, ValueError) as exc:
            print(f"bench_zoo: cannot read {args.replay}: {exc}", file=sys.stderr)
            return 2
    else:
        data = measure_all(args, default, zoo_dir)
        if args.save_json:
            Path(args.save_json).write_text(json.dumps(data, indent=1))
    return 0 if report(data, default, zoo_dir) else 1


if __name__ == "__main__":
    sys.exit(main())
