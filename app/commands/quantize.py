"""`roofline quantize IN OUT TYPE`: make a smaller GGUF from an F32/F16/BF16 one with llama.cpp's quantizer.

The result is loaded once to check it works, then registered in the library with where it came from.
Ctrl-C cancels and deletes the partial output.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from app.commands import _args as A
    from app.core.gguf.quant_types import QUANTIZE_TARGETS

    p = sub.add_parser("quantize", help="quantize an F32/F16/BF16 GGUF (Q8_0, Q6_K, Q5_K_M, Q4_K_M, ...)")
    p.add_argument("input", help="source GGUF (F32, F16 or BF16)")
    p.add_argument("output", help="file to write; a bare name goes into the models directory")
    p.add_argument("type", type=str.upper, choices=QUANTIZE_TARGETS, metavar="TYPE",
                   help=", ".join(QUANTIZE_TARGETS))
    p.add_argument("--threads", type=A.threads_or_zero, default=0, help="0: all cores")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from app.commands._common import fail
    from app.core.config import paths
    from app.core.hub.downloads import DownloadError
    from app.core.metrics.phase import fmt_bytes
    from app.engine.quantize_client import QuantizeError, QuantizeJob

    out = Path(args.output)
    if out.parent == Path("."):
        try:
            out = paths.models_dir() / out
        except OSError as exc:
            return fail(f"cannot use the models folder: {exc.strerror or exc} ({exc.filename or ''})")
    last = [-1]

    def on_event(event, state) -> None:  # type: ignore[no-untyped-def]
        kind = event.get("event")
        if kind == "start":
            print(f"quantizing {args.input} -> {out} ({args.type}, expect ~{fmt_bytes(state.predicted_bytes)})",
                  file=sys.stderr)
        elif kind == "progress":
            pct = int(state.fraction * 100)
            if pct // 5 != last[0]:
                last[0] = pct // 5
                print(f"  {pct:3d}%  {fmt_bytes(state.bytes)}  tensor {state.tensor}/{state.tensors}",
                      file=sys.stderr, flush=True)
        elif kind == "verified":
            print(f"  loaded and generated {event.get('tokens')} tokens: OK", file=sys.stderr)

    job = QuantizeJob(args.input, out, args.type, args.threads, on_event=on_event)
    try:
        path = job.run()
    except KeyboardInterrupt:
        job.cancel()
        job.partial_path.unlink(missing_ok=True)
        print("cancelled; partial output deleted", file=sys.stderr)
        return 130
    except (QuantizeError, DownloadError) as exc:
        return fail(str(exc))
    print(path)
    return 0
