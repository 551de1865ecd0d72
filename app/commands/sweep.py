"""`roofline sweep KIND`: benchmark sweeps (prompt × generation grid, KV depth, n_ubatch, threads, KV type)
with a one-sentence finding, exported as llama-bench JSON rows, CSV and a PNG chart."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands import _args as A
from app.commands import _sweep_batch as sweep_batch
from app.commands._common import add_model_arg, api_key_arg, fail, resolve_model


def register(sub: argparse._SubParsersAction) -> None:
    from app.core.bench.sweeps import KINDS

    p = sub.add_parser("sweep", help="benchmark sweeps that show which phase (prefill/decode) dominates")
    p.add_argument("kind", choices=(*KINDS, "batch"), help="grid: prompt × generation length; depth: decode vs "
                   "KV depth; ubatch: prefill vs n_ubatch; threads: both phases vs threads; kv: KV type / flash "
                   "attention; offload: both phases vs n_gpu_layers, beside the predicted decode; batch: decode "
                   "tok/s vs concurrent streams (continuous batching)")
    add_model_arg(p)
    p.add_argument("-p", "--prompts", type=A.int_list(1), help="grid: prompt lengths (default 64,128,256,512,1024); "
                   "offload: the prompt measured at each level (default 128)")
    p.add_argument("-n", "--gens", type=A.int_list(1), help="grid: generation lengths (default 32,128); offload: "
                   "the tokens decoded at each level (default 16)")
    p.add_argument("-d", "--depths", type=A.int_list(0), help="depth: KV depths (default 0,256,512,1024,2048)")
    p.add_argument("-ub", "--ubatches", type=A.int_list(1, A.INT32_MAX),
                   help="ubatch: n_ubatch values (default 32..512)")
    p.add_argument("-t", "--threads", type=A.int_list(1, A.MAX_THREADS),
                   help="threads: thread counts (default 1..cores)")
    p.add_argument("-ngl", "--layers", type=A.int_list(0),
                   help="offload: n_gpu_layers values (default: 0, a quarter, half, three quarters, all)")
    p.add_argument("-r", "--repetitions", type=A.repetitions, default=3)
    p.add_argument("--remote", default=None, help="run the grid against an OpenAI-compatible server")
    p.add_argument("--api-key", default=None, help="API key for --remote; '-' prompts for it; default: "
                   "$ROOFLINE_API_KEY, then the OS keyring")
    p.add_argument("--model-name", default=None, help="model name on the --remote server")
    p.add_argument("--json", dest="json_out", type=Path, help="write llama-bench JSON rows here")
    p.add_argument("--csv", dest="csv_out", type=Path, help="write the analysed points as CSV here")
    p.add_argument("--png", dest="png_out", type=Path, help="write the chart as PNG here")
    sweep_batch.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.kind == "batch":
        return sweep_batch.run_batch(args)
    import os

    from app.core.bench.sweeps import context_needed, plan, run_sweep
    from app.engine import protocol as P
    from app.engine.client import EngineClient, EngineError

    opts = {k: v for k, v in {"prompts": args.prompts, "gens": args.gens, "depths": args.depths,
                               "ubatches": args.ubatches, "threads": args.threads, "layers": args.layers}.items()
            if v}
    info = None
    if args.kind == "offload" and not args.remote:
        from app.commands._common import inspect_or_fail

        info = inspect_or_fail(resolve_model(args.model))
        if info is None:
            return 1
        opts["n_layers"] = info.n_layers
        if args.prompts:  # the sizes of each level's two measurements
            opts["n_prompt"] = args.prompts[0]
        if args.gens:
            opts["n_gen"] = args.gens[0]
    if args.repetitions < 1:
        return fail("--repetitions must be at least 1")
    try:
        steps = plan(args.kind, opts, n_cpus=os.cpu_count() or 1, remote=bool(args.remote))
    except ValueError as exc:
        return fail(str(exc))

    def progress(i: int, n: int, label: str) -> None:
        print(f"[{i}/{n}] {label}", file=sys.stderr, flush=True)

    try:
        if args.remote:
            from app.engine.remote.backend import RemoteClient
            from app.engine.sweep_backend import RemoteSweepBackend

            with RemoteClient(args.remote, api_key=api_key_arg(args.api_key), model=args.model_name,
                              timeout=120) as remote:
                remote.connect()
                result = run_sweep(args.kind, steps, RemoteSweepBackend(remote), args.repetitions, progress)
        else:
            from app.commands._preflight import check_context_fits
            from app.engine.sweep_backend import EngineSweepBackend

            model = resolve_model(args.model)
            refused = check_context_fits(model, context_needed(steps), hint="keep the sizes within {n} tokens")
            if refused:
                return fail(refused)
            base = P.LoadConfig(model_path=str(model), n_ctx=context_needed(steps), n_batch=2048)
            with EngineClient() as engine:
                result = run_sweep(args.kind, steps, EngineSweepBackend(engine, base), args.repetitions, progress)
    except EngineError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    if info is not None and result.points:
        from app.core.bench.sweeps import attach_offload_prediction
        from app.core.predict.recommend import Machine, decode_at_offload
        from app.engine.device_query import query_devices

        machine = Machine.from_system(llama_devices=query_devices())
        attach_offload_prediction(result, decode_at_offload(info, machine, context_needed(steps)))
    print(result.csv_text(), end="")
    if result.predicted:
        print("predicted decode tok/s by n_gpu_layers: "
              + ", ".join(f"{p['n_gpu_layers']}:{p['decode_tps']:.1f}" for p in result.predicted))
    print(f"\n{result.finding}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result.rows(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out} (llama-bench rows)", file=sys.stderr)
    if args.csv_out:
        args.csv_out.write_text(result.csv_text(), encoding="utf-8")
        print(f"wrote {args.csv_out}", file=sys.stderr)
    if args.png_out:
        from app.charts.sweep_chart import render_png

        render_png(result, args.png_out)
        print(f"wrote {args.png_out}", file=sys.stderr)
    return 0
