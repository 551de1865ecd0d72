"""`roofline sweep batch`: aggregate and per-stream decode tok/s at 1, 2, 4, 8, 16 concurrent streams on the
model, with app.core.predict.batching's predicted curve beside the measured one and where batching stops paying.

Wired into `roofline sweep` (app.commands.sweep): its options are added there by `add_arguments`, and its
kind is run by `run_batch`. The measuring is app.engine.batch.sweep's (the batch engine `roofline serve`
uses); the table and the finding are app.core.bench.batch_sweep's.
"""

from __future__ import annotations

import argparse
import json
import sys

from app.commands import _args as A
from app.commands._common import fail, resolve_model

DEFAULT_STREAMS = [1, 2, 4, 8, 16]
DEFAULT_TOKENS = 64
MAX_STREAMS = 64  # roofline serve's --parallel limit


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--streams", type=A.int_list(1, MAX_STREAMS),
                   help="batch: concurrent stream counts (default 1,2,4,8,16)")
    p.add_argument("--tokens", type=A.int_range(4, 4096), default=DEFAULT_TOKENS,
                   help=f"batch: tokens each stream decodes (default {DEFAULT_TOKENS})")


def run_batch(args: argparse.Namespace) -> int:
    """`roofline sweep batch`; `--json PATH` writes the result as JSON (`--json -`: JSON on stdout only)."""
    if args.remote:
        return fail("sweep batch runs the model here (the batch engine); --remote is not supported", 2)
    counts = sorted(set(args.streams or DEFAULT_STREAMS))
    threads = args.threads[0] if args.threads else None
    if args.threads and len(args.threads) > 1:
        return fail("sweep batch takes one thread count (-t N)", 2)
    if args.repetitions < 1:
        return fail("--repetitions must be at least 1", 2)

    from app.core.bench.batch_sweep import build_rows, finding, predicted_curve, table_text, to_json
    from app.engine import protocol as P
    from app.engine.batch.sweep import BatchSweepError, measure_batch, sweep_config
    from app.engine.client import EngineError

    model = resolve_model(args.model)
    from app.commands._preflight import check_context_fits

    base = P.LoadConfig(model_path=str(model), n_threads=threads)
    refused = check_context_fits(model, sweep_config(base, counts, args.tokens).n_ctx,
                                 hint="use fewer --streams or --tokens (the largest that fits is {n} tokens)")
    if refused:
        return fail(refused)

    def progress(i: int, n: int, label: str) -> None:
        print(f"[{i}/{n}] {label}", file=sys.stderr, flush=True)

    try:
        points = measure_batch(base, counts, args.tokens, args.repetitions, progress)
    except (EngineError, BatchSweepError) as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    measured = [(p.streams, p.aggregate_tps) for p in points]
    predicted, calibrated = predicted_curve(model, counts, threads=threads, tokens=args.tokens)
    rows = build_rows(measured, predicted)
    sentence = finding(measured)
    source = "calibrated rates" if calibrated else "uncalibrated rates (run `roofline calibrate`)"
    result = to_json(rows, sentence, {"model": model.name, "tokens": args.tokens, "rounds": args.repetitions,
                                      "threads": threads, "prediction": source})
    json_out = args.json_out
    if json_out is not None and str(json_out) == "-":
        print(json.dumps(result, indent=2))
        return 0
    print(f"# {model.name}: {args.tokens} tokens per stream, median of {args.repetitions} round(s); "
          f"predicted with {source}")
    print(table_text(rows), end="")
    print(f"\n{sentence}")
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {json_out}", file=sys.stderr)
    return 0
