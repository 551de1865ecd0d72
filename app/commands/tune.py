"""`roofline tune`: choose threads and n_ubatch for this machine and model from a short sweep, and store
the choice so that chats with "auto" threads use it."""

from __future__ import annotations

import argparse
import sys

from app.commands import _args as A
from app.commands._common import add_model_arg, fail, print_json, resolve_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="auto-tune threads and n_ubatch for this machine and model")
    add_model_arg(p)
    p.add_argument("-r", "--repetitions", type=A.repetitions, default=2)
    p.add_argument("--rounds", type=A.repetitions, default=2,
                   help="interleaved rounds over the configurations (default 2: a burst of load in one round "
                        "cannot pick the winner; 1 is twice as fast)")
    p.add_argument("--show", action="store_true", help="print the stored choice and exit")
    p.add_argument("--forget", action="store_true", help="delete the stored choice and exit")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.core.predict import autotune

    model = resolve_model(args.model)
    if args.show:
        entry = autotune.tuned_entry(model)
        if entry is None:
            return fail(f"not tuned yet for {model.name} on this machine: run `roofline tune`")
        if args.json:
            print_json(entry)
        else:
            print(entry["finding"])
            print(f"config: {autotune.tuned_config(model)}  (measured {entry['time']})")
        return 0
    if args.forget:
        print("forgotten" if autotune.forget_tuned(model) else "nothing stored")
        return 0
    if args.repetitions < 1:
        return fail("--repetitions must be at least 1")

    from app.engine import protocol as P
    from app.engine.client import EngineClient, EngineError
    from app.engine.sweep_backend import EngineSweepBackend

    base = P.LoadConfig(model_path=str(model), n_ctx=1024)

    def progress(i: int, n: int, label: str) -> None:
        print(f"[{i}/{n}] {label}", file=sys.stderr, flush=True)

    try:
        with EngineClient() as engine:
            result = autotune.autotune(EngineSweepBackend(engine, base), repetitions=args.repetitions,
                                       rounds=args.rounds, progress=progress)
    except EngineError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    autotune.save_tuned(model, result)
    if args.json:
        print_json({"config": result.best.config, "finding": result.finding,
                    "tried": [{**c.config, "prefill_tps": c.prefill_tps, "decode_tps": c.decode_tps}
                              for c in result.tried]})
    else:
        for c in result.tried:
            print(f"threads {c.n_threads}/{c.n_threads_batch}  n_ubatch {c.n_ubatch:4d}  "
                  f"prefill {c.prefill_tps:8.1f} tok/s  decode {c.decode_tps:6.1f} tok/s")
        print(result.finding)
        print(f"stored in {autotune.store_path()}")
    return 0
