"""`roofline bench`: llama-bench style pp/tg measurement through the engine, with llama-bench's JSON."""

from __future__ import annotations

import argparse
import sys

from app.commands import _args as A
from app.commands._common import add_model_arg, fail, print_json, resolve_model
from app.core.gguf.kv_types import DEFAULT_KV_TYPE, KV_TYPES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure prompt processing (pp) and generation (tg) like llama-bench")
    add_model_arg(p)
    p.add_argument("-p", "--n-prompt", type=A.int_list(0), default=[512],
                   help="prompt sizes, comma-separated (0: none)")
    p.add_argument("-n", "--n-gen", type=A.int_list(0), default=[128],
                   help="generation sizes, comma-separated (0: none)")
    p.add_argument("-d", "--n-depth", type=A.int_list(0), default=[0], help="KV cache depth filled before each test")
    p.add_argument("-r", "--repetitions", type=A.repetitions, default=5)
    p.add_argument("-t", "--threads", type=A.threads, default=None, help="threads (default: llama.cpp's choice)")
    p.add_argument("-b", "--batch-size", type=A.batch_size, default=2048)
    p.add_argument("-ub", "--ubatch-size", type=A.batch_size, default=512)
    p.add_argument("-ngl", "--n-gpu-layers", type=A.gpu_layers, default=0)
    p.add_argument("--n-cpu-moe", "-ncmoe", type=A.int_range(0), default=0, metavar="N",
                   help="MoE models: keep the expert weights of the first N blocks in RAM, the rest on the GPU")
    p.add_argument("-ctk", "--cache-type-k", default=DEFAULT_KV_TYPE, choices=KV_TYPES)
    p.add_argument("-ctv", "--cache-type-v", default=DEFAULT_KV_TYPE, choices=KV_TYPES)
    p.add_argument("-fa", "--flash-attn", type=int, default=0, choices=[0, 1])
    p.add_argument("--json", action="store_true", help="print llama-bench's JSON (a list of rows)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.core.bench.llama_bench_format import bench_row, markdown_table
    from app.engine import protocol as P
    from app.engine.client import EngineClient, EngineError

    model = resolve_model(args.model)
    tests = [(p, 0, d) for d in args.n_depth for p in args.n_prompt if p > 0] + \
            [(0, n, d) for d in args.n_depth for n in args.n_gen if n > 0]
    if not tests:
        print("roofline: nothing to measure (all sizes are 0)", file=sys.stderr)
        return 2
    need = max(p + n + d for p, n, d in tests)
    n_ctx = max(256, -(-need // 256) * 256)
    from app.commands._preflight import check_context_fits

    refused = check_context_fits(model, n_ctx, args.cache_type_k, args.cache_type_v, args.n_gpu_layers,
                                 hint="keep -p + -n + -d within {n}")
    if refused:
        return fail(refused)
    cfg = P.LoadConfig(model_path=str(model), n_ctx=n_ctx, n_threads=args.threads, n_batch=args.batch_size,
                       n_ubatch=args.ubatch_size, n_gpu_layers=args.n_gpu_layers, n_cpu_moe=args.n_cpu_moe,
                       type_k=args.cache_type_k,
                       type_v=args.cache_type_v, flash_attn=bool(args.flash_attn))
    rows = []
    with EngineClient() as engine:
        try:
            loaded = engine.load(cfg)
            backend = "GPU" if engine.ready and engine.ready.gpu_offload and args.n_gpu_layers else "CPU"
            for n_prompt, n_gen, depth in tests:
                if not args.json:
                    print(f"running pp{n_prompt} tg{n_gen} d{depth} ...", file=sys.stderr)
                res = engine.bench(P.Bench(request_id=engine.new_request_id("b"), n_prompt=n_prompt,
                                           n_gen=n_gen, n_depth=depth, repetitions=args.repetitions))
                if len(res.samples_ns) < args.repetitions or min(res.samples_ns, default=0) <= 0:
                    # never print a mean over nothing as if it were a measurement
                    return fail(f"pp{n_prompt} tg{n_gen} d{depth}: the engine returned {len(res.samples_ns)} "
                                f"usable timing(s) for {args.repetitions} repetition(s)")
                rows.append(bench_row(n_prompt=n_prompt, n_gen=n_gen, n_depth=depth, samples_ns=res.samples_ns,
                                      model_info=res.model_info, backend=backend,
                                      build="llama-cpp-python "
                                            f"{engine.ready.llama_cpp_version if engine.ready else '?'}"))
        except EngineError as exc:
            from app.core.files.untrusted import clean_text

            print(f"roofline: {clean_text(exc)}", file=sys.stderr)  # may quote llama.cpp on the model's metadata
            return 1
    if args.json:
        print_json(rows)
    else:
        print(markdown_table(rows))
        print(f"\nmodel: {loaded.model_path}  n_ctx {loaded.n_ctx}  threads {loaded.n_threads}")
    return 0
