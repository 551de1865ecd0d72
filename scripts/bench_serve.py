"""Benchmark: continuous batching under N concurrent streaming clients, against the reference servers.

Starts each server on loopback with the same model, context and thread count: `roofline serve`,
llama-cpp-python's `llama_cpp.server` (when its extras are installed) and llama.cpp's `llama-server`
(when a built binary is found: --llama-server PATH, $LLAMA_SERVER, or the copy scripts/_llama_tools.sh
builds under ~/.cache/roofline-build/). Then, interleaved round by round so machine noise hits all alike:
one streaming request alone, then N at once (distinct prompts, so no server gets a shared-prefix
advantage). Every request streams /v1/completions with max_tokens and ignore_eos (servers that ignore it
may stop early: rates count the tokens actually received, one per content chunk).

Reported per server: aggregate tok/s of N streams and its ratio to one stream, TTFT p50/p99 of the N
streams, ITL p99 alone and under N, and whether the slowest first token of N came before one request alone
would have finished. Targets from the issue are checked at the end.

`--hostile`: instead, how long a 32 MB prompt from one client stalls another client's stream
(scripts/_serve_hostile.py).
"""

from __future__ import annotations

import argparse
import glob
import http.client
import importlib.util
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.models.default_model import default_model_path  # noqa: E402 - after sys.path points at this checkout
from app.core.predict.batching import stops_paying  # noqa: E402 - after sys.path points at this checkout

PROMPTS = [
    "The history of the printing press begins", "A recipe for bread needs", "The planets of the solar system are",
    "In the beginning of the industrial revolution", "The rules of chess say that", "Photosynthesis is the process",
    "A short story about a lighthouse keeper:", "The causes of the first world war were",
    "To learn a new language quickly,", "The ocean covers most of the earth and", "Volcanoes form when",
    "The invention of the telephone", "Good software engineering practice means", "Mountains are made by",
    "The city at night was quiet until", "An introduction to prime numbers:",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    cmd: list[str]
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})

    def wait_up(self, timeout: float = 180.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/v1/models")
                ok = conn.getresponse().status == 200
                conn.close()
                if ok:
                    return True
            except OSError:
                pass
            time.sleep(0.5)
        return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class StreamResult:
    start: float
    token_times: list[float]
    error: str | None = None
    usage_tokens: int | None = None  # the server's own count (stream_options.include_usage), when it sends one

    @property
    def n_tokens(self) -> int:
        """Tokens generated: the server's usage count, else one per content chunk. A model whose tokens
        detokenize to nothing (a zoo model's zero weights pick <unk>) still streams chunks and counts them."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.token_times)

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.start if self.token_times else float("nan")

    @property
    def end(self) -> float:
        return self.token_times[-1] if self.token_times else self.start

    @property
    def itls(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in itertools.pairwise(t)]


def stream_once(port: int, prompt: str, max_tokens: int, start_gate: threading.Barrier | None) -> StreamResult:
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0.0,
                       "ignore_eos": True, "seed": 1, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    if start_gate is not None:
        start_gate.wait()
    t0 = time.monotonic()
    times: list[float] = []
    usage: int | None = None
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return StreamResult(t0, [], f"HTTP {resp.status}: {resp.read()[:200]!r}")
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            chunk = json.loads(payload)
            choices = chunk.get("choices") or []
            if choices and (choices[0].get("text") or choices[0].get("finish_reason") is None):
                times.append(time.monotonic())
            if isinstance(chunk.get("usage"), dict) and "completion_tokens" in chunk["usage"]:
                usage = int(chunk["usage"]["completion_tokens"])
    except (OSError, ValueError) as exc:
        return StreamResult(t0, times, str(exc), usage)
    finally:
        conn.close()
    return StreamResult(t0, times, None, usage)


def run_concurrent(port: int, n: int, max_tokens: int, offset: int) -> tuple[list[StreamResult], float]:
    gate = threading.Barrier(n)
    results: list[StreamResult | None] = [None] * n

    def one(i: int) -> None:
        results[i] = stream_once(port, PROMPTS[(offset + i) % len(PROMPTS)], max_tokens, gate)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for r in results if r is not None]
    t_start = min(r.start for r in done)
    t_end = max(r.end for r in done)
    return done, t_end - t_start


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, round(q * (len(v) - 1)))]


def find_llama_server(explicit: str | None) -> str | None:
    for cand in [explicit, os.environ.get("LLAMA_SERVER")]:
        if cand and os.access(cand, os.X_OK):
            return cand
    hits = sorted(glob.glob(os.path.expanduser("~/.cache/roofline-build/llama-tools-*/**/llama-server"),
                            recursive=True))
    hits = [h for h in hits if os.access(h, os.X_OK) and ".tmp" not in h]
    return hits[-1] if hits else None


def load_info() -> str:
    la = os.getloadavg()
    return f"load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} on {os.cpu_count()} CPUs"


def predicted_curve(model: str, counts: list[int], threads: int, tokens: int) -> tuple[dict[int, Any], str]:
    """app.core.predict.batching's prediction with this machine's rates for `threads` (a stored calibration if any)."""
    from app.core.bench import batch_sweep

    points, calibrated = batch_sweep.predicted_curve(model, counts, threads=threads, tokens=tokens)
    source = "calibrated rates" if calibrated else "uncalibrated rates (run `roofline calibrate`)"
    return {p.streams: p for p in points}, source


def sweep(model: str, counts: list[int], args: argparse.Namespace) -> int:
    """Aggregate and per-stream decode tok/s at each stream count, on one server with enough slots."""
    slots = max(counts)
    port = free_port()
    server = Server("roofline serve", [sys.executable, "-m", "app.cli", "serve", "-m", model, "--port", str(port),
                                       "--parallel", str(slots), "--ctx", str(max(args.ctx, 256 * slots)),
                                       "-t", str(args.threads)], port)
    print(f"# bench_serve --sweep {time.strftime('%Y-%m-%d %H:%M')}  model {Path(model).name}  "
          f"max_tokens {args.tokens}  threads {args.threads}  rounds {args.rounds}")
    print(f"# before: {load_info()}")
    server.start()
    if not server.wait_up():
        print("# roofline serve did not start")
        return 1
    stream_once(port, "Warm-up:", 8, None)
    rates: dict[int, list[float]] = {n: [] for n in counts}
    try:
        for r in range(args.rounds):
            for n in counts:  # interleaved: every count sees the same machine noise
                results, wall = run_concurrent(port, n, args.tokens, offset=r * slots)
                rates[n].append(sum(x.n_tokens for x in results) / max(1e-9, wall))
    finally:
        server.stop()
    print(f"# after: {load_info()}")
    predicted, source = predicted_curve(model, counts, args.threads, args.tokens)
    print(f"# predicted: app.core.predict.batching with {source}")
    print()
    print("| streams | aggregate tok/s | per stream tok/s | gain over the previous count | predicted aggregate | "
          "measured / predicted | predicted bound |")
    print("|---|---|---|---|---|---|---|")
    previous = None
    measured: list[tuple[int, float]] = []
    for n in counts:
        agg = statistics.median(rates[n])
        measured.append((n, agg))
        gain = agg / previous if previous else None
        p = predicted.get(n)
        print(f"| {n} | {agg:.1f} | {agg / n:.1f} | {'' if gain is None else f'{gain:.2f}x'} | "
              f"{p.aggregate_tps if p else float('nan'):.1f} | "
              f"{agg / p.aggregate_tps if p else float('nan'):.2f} | {p.bound if p else ''} |")
        previous = agg
    print()
    stops = stops_paying(measured)
    if stops is None:
        print(f"finding: aggregate decode still grows at {counts[-1]} streams on this machine")
    else:
        print(f"finding: on this machine batching stops paying at ~{stops} streams "
              "(less than 10 % more aggregate tok/s than the count before)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("-n", "--streams", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens per request")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-c", "--ctx", type=int, default=4096, help="total context (shared by the N slots)")
    ap.add_argument("--servers", default="roofline,llama-cpp-python,llama-server")
    ap.add_argument("--llama-server", default=None, help="path to llama.cpp's llama-server binary")
    ap.add_argument("--hostile", action="store_true", help="instead: how long 32 MB prompts stall another "
                    "client's stream (status, duration, the stream's longest gap; target < 1 s)")
    ap.add_argument("--sweep", default=None, help="instead: roofline serve alone at these stream counts, "
                    "e.g. 1,2,4,8,16 (aggregate and per-stream tok/s, where batching stops paying)")
    args = ap.parse_args()
    model = args.model or str(default_model_path())
    if args.sweep:
        return sweep(model, [int(x) for x in args.sweep.split(",") if x.strip()], args)
    n, want = args.streams, set(args.servers.split(","))
    servers: list[Server] = []
    if "roofline" in want:
        port = free_port()
        servers.append(Server("roofline serve", [sys.executable, "-m", "app.cli", "serve", "-m", model,
                                                 "--port", str(port), "--parallel", str(n), "--ctx",
                                                 str(args.ctx), "-t", str(args.threads)], port))
    if "llama-cpp-python" in want:
        missing = [m for m in ("llama_cpp", "fastapi", "sse_starlette", "starlette_context")
                   if importlib.util.find_spec(m) is None]
        if missing:
            print(f"# llama-cpp-python's server: not installed (missing {', '.join(missing)})")
        else:
            port = free_port()
            servers.append(Server("llama_cpp.server", [
                sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1", "--port",
                str(port), "--n_ctx", str(args.ctx), "--n_threads", str(args.threads),
                "--n_threads_batch", str(args.threads)], port))
    if "llama-server" in want:
        binary = find_llama_server(args.llama_server)
        if binary is None:
            print("# llama-server: no built binary found (scripts/_llama_tools.sh builds one)")
        else:
            port = free_port()
            servers.append(Server("llama-server", [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port),
                                                   "-c", str(args.ctx), "-np", str(n), "-t", str(args.threads),
                                                   "-tb", str(args.threads)], port))
    print(f"# bench_serve {time.strftime('%Y-%m-%d %H:%M')}  model {Path(model).name}  streams {n}  "
          f"max_tokens {args.tokens}  threads {args.threads}  ctx {args.ctx}  rounds {args.rounds}")
    print(f"# before: {load_info()}")
    live: list[Server] = []
    for s in servers:
        s.start()
    for s in servers:
        if s.wait_up():
            live.append(s)
            stream_once(s.port, "Warm-up:", 8, None)
        else:
            print(f"# {s.name}: did not start")
            s.stop()
    if args.hostile:
        from _serve_hostile import print_report

        try:
            print_report([(s.name, s.port) for s in live])
        finally:
            for s in live:
                s.stop()
        print(f"# after: {load_info()}")
        return 0
    single: dict[str, list[StreamResult]] = {s.name: [] for s in live}
    multi: dict[str, list[tuple[list[StreamResult], float]]] = {s.name: [] for s in live}
    try:
        for r in range(args.rounds):
            for s in live:
                single[s.name].append(stream_once(s.port, PROMPTS[r % len(PROMPTS)], args.tokens, None))
                multi[s.name].append(run_concurrent(s.port, n, args.tokens, offset=1 + r * n))
    finally:
        for s in live:
            s.stop()
    print(f"# after: {load_info()}")
    print()
    print(f"| server | 1 stream tok/s | {n} streams tok/s | ratio | TTFT p50 / p99 ({n}) ms | "
          f"ITL p99 alone / {n} ms | slowest 1st token < one request | tokens received | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary: dict[str, dict[str, float]] = {}
    for s in live:
        ones = single[s.name]
        one_rate = statistics.median(x.n_tokens / max(1e-9, x.end - x.start) for x in ones)
        one_total = statistics.median(x.end - x.start for x in ones)
        rates, ttfts, itl_n, firsts_ok, errors, received = [], [], [], 0, 0, 0
        for results, wall in multi[s.name]:
            rates.append(sum(x.n_tokens for x in results) / max(1e-9, wall))
            ttfts += [x.ttft for x in results if x.token_times]
            itl_n += [d for x in results for d in x.itls]
            errors += sum(1 for x in results if x.error)
            received += sum(x.n_tokens for x in results)
            firsts_ok += int(max(x.ttft for x in results) < one_total)
        itl_1 = [d for x in ones for d in x.itls]
        # a server that cuts a stream short (llama_cpp.server interrupts one request for the next) shows here
        expected = args.tokens * n * len(multi[s.name])
        agg = statistics.median(rates)
        summary[s.name] = {"agg": agg, "ratio": agg / one_rate, "itl1": pct(itl_1, 0.99), "itln": pct(itl_n, 0.99)}
        print(f"| {s.name} | {one_rate:.1f} | {agg:.1f} | {agg / one_rate:.2f}x | {pct(ttfts, 0.5) * 1e3:.0f} / "
              f"{pct(ttfts, 0.99) * 1e3:.0f} | {pct(itl_1, 0.99) * 1e3:.0f} / {pct(itl_n, 0.99) * 1e3:.0f} | "
              f"{firsts_ok}/{len(multi[s.name])} rounds | {received}/{expected} | {errors} |")
    ours = summary.get("roofline serve")
    ref = summary.get("llama-server")
    print()
    if ours:
        print(f"target ITL p99 under {n} < 3x alone: {ours['itln'] / ours['itl1']:.2f}x "
              f"({'met' if ours['itln'] < 3 * ours['itl1'] else 'NOT met'})")
        # no schedule gives a stream its next token sooner than one step of all n streams
        points, source = predicted_curve(model, [1, n], args.threads, args.tokens)
        print(f"predicted: one step of {n} streams takes {points[n].step_s / points[1].step_s:.2f}x a single "
              f"stream's step (app.core.predict.batching, {source})")
    if ours and ref:
        print(f"target {n}-stream aggregate >= 0.9x llama-server's: {ours['agg'] / ref['agg']:.2f}x "
              f"({'met' if ours['agg'] >= 0.9 * ref['agg'] else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
