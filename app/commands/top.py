"""`roofline top --remote URL`: a serving engine's own numbers, live, on one terminal screen.

Requests running and waiting, KV-cache use, prefix-cache hits, TTFT and ITL percentiles, prefill and decode
rates per request and for all requests, spec-decode acceptance: each over the last minute of polls, from the
server's /metrics (vLLM, SGLang, TensorRT-LLM, llama-server, roofline serve) or Ollama's /api/ps
(app.engine.remote.server_metrics). `--once` prints one screen (numbers since the server started) and exits:
status 1 when the server's metrics cannot be read. Live, a failed poll shows its one line and the next poll
tries again; Ctrl+C ends it.
"""

from __future__ import annotations

import argparse
import sys
import time

from app.commands._common import api_key_arg, fail, print_json
from app.core.remote.engines import ENGINES

CLEAR = "\x1b[H\x1b[2J"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("top", help="a serving engine's own metrics, live (vLLM, SGLang, TensorRT-LLM, "
                       "llama-server, Ollama)")
    p.add_argument("--remote", required=True, metavar="URL", help="the server's base URL")
    p.add_argument("--api-key", default=None, help="'-' prompts for it; default: $ROOFLINE_API_KEY, then the "
                   "OS keyring")
    p.add_argument("--engine", default=None, choices=ENGINES, help="the engine (default: told from what the "
                   "server serves)")
    p.add_argument("--interval", type=float, default=2.0, metavar="S", help="seconds between polls (default 2)")
    p.add_argument("--timeout", type=float, default=3.0, metavar="S", help="seconds a poll may take (default 3)")
    p.add_argument("--once", action="store_true", help="one screen, then exit")
    p.add_argument("--json", action="store_true", help="with --once: the measures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.core.files.untrusted import clean_line
    from app.core.remote.text import screen_lines
    from app.engine.client import EngineError
    from app.engine.remote.backend import RemoteClient
    from app.engine.remote.server_metrics import MetricsSource, MetricsUnavailable

    if not 0.2 <= args.interval <= 3600 or not 0.2 <= args.timeout <= 600:
        return fail("--interval must be 0.2..3600 s and --timeout 0.2..600 s", 2)
    client = RemoteClient(args.remote, api_key=api_key_arg(args.api_key))
    try:
        client.start()
        source = MetricsSource(client, args.engine, args.timeout)
    except (EngineError, MetricsUnavailable) as exc:
        return fail(str(exc))
    where = client.url_for("")[0]
    if args.once:
        try:
            m = source.poll()
        except MetricsUnavailable as exc:
            return fail(str(exc))
        if args.json:
            print_json(m.to_dict())
        else:
            print("\n".join(clean_line(line) for line in screen_lines(m, where)))
        return 0
    live = sys.stdout.isatty()
    try:
        while True:
            started = time.monotonic()
            try:
                lines = screen_lines(source.poll(), where)
            except MetricsUnavailable as exc:
                lines = [where, f"error    : {exc}", "(trying again)"]
            stamp = time.strftime("%H:%M:%S")
            screen = "\n".join(clean_line(line) for line in [f"roofline top · {stamp} · Ctrl+C ends", *lines])
            sys.stdout.write((CLEAR if live else "\n") + screen + "\n")
            sys.stdout.flush()
            time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 0
    finally:
        source.close()
