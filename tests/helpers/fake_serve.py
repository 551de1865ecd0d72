"""A stand-in for `roofline serve` for the window's Serve switch tests: takes the same options, listens on
127.0.0.1 (the port asked for, or a free one for 0), prints the same "listening on" line, and answers
/metrics with llama-server's names: 2 requests running, 1 waiting, 300 KV tokens, and 20 more reply tokens
and one more first token (0.25 s) at every poll. FAKE_SERVE_DIE_AFTER=S: it says why on stderr and exits 3
after S seconds. It ends on SIGTERM, and by itself after 120 s at most; with --parent-pid it runs the real
command's parent watch (app.commands.serve.exit_with_parent)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: this checkout's app, not another

polls = 0


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        global polls
        if self.path != "/metrics":
            self.send_error(404)
            return
        polls += 1
        body = "\n".join([
            "# HELP llamacpp:requests_processing Number of requests processing.",
            "llamacpp:requests_processing 2", "llamacpp:requests_deferred 1", "llamacpp:kv_cache_tokens 300",
            "llamacpp:kv_cache_usage_ratio 0.25", f"llamacpp:tokens_predicted_total {20 * polls}",
            'llamacpp:time_to_first_token_seconds_bucket{le="+Inf"} 1',
            f"llamacpp:time_to_first_token_seconds_sum {0.25 * polls}",
            f"llamacpp:time_to_first_token_seconds_count {polls}", ""]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("-m")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--parallel")
    p.add_argument("--ctx")
    p.add_argument("-t")
    p.add_argument("--parent-pid", type=int)
    args = p.parse_args()
    if args.parent_pid is not None:
        from app.commands.serve import exit_with_parent

        exit_with_parent(args.parent_pid)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    die_after = float(os.environ.get("FAKE_SERVE_DIE_AFTER", "0") or 0)
    deadline = time.monotonic() + (die_after or 120)
    while time.monotonic() < deadline:
        time.sleep(0.05)
    if die_after:
        print("the engine died: out of memory", file=sys.stderr, flush=True)
        os._exit(3)


if __name__ == "__main__":
    main()
