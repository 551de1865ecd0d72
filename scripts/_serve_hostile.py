"""`scripts/bench_serve --hostile`: how long one client's hostile request stalls another client's stream.

For each server: a long greedy stream runs (`/v1/completions`, ignore_eos); once it flows, a 32 MB
text/plain POST of "hello world " × 2.7M goes to /v1/completions, then the same as one chat message to
/v1/chat/completions, then a 1 MB and a 36 kB prompt (over a slot, but under the body's and the bytes'
bounds: the second is tokenized), then four 32 MB completions at once. Each hostile client is its own
process, so its upload does not compete with the stream's reader for one interpreter. For each case: the
statuses, how long the hostile requests took, the stream's longest wait for a token meanwhile (the
target: under 1 s), and whether an ordinary request is answered right after the four.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

HOSTILE_TEXT = "hello world " * 2_700_000
TARGET_GAP_S = 1.0


@dataclass
class Watched:
    """A stream read on its own thread, each token's arrival kept."""

    port: int
    times: list[float] = field(default_factory=list)
    done: bool = False

    def start(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 100_000, "stream": True,
                           "temperature": 0.0, "ignore_eos": True})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            for raw in conn.getresponse():
                if raw.startswith(b"data:"):
                    self.times.append(time.monotonic())
                if self.done:
                    return
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def longest_gap(self, start: float, end: float) -> float:
        inside = [start, *(t for t in self.times if start < t < end), end]
        return max(b - a for a, b in zip(inside, inside[1:], strict=False))


def post(port: int, path: str, body: bytes, timeout: float = 900) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": "text/plain"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except OSError as exc:
        return 0, str(exc).encode()
    finally:
        conn.close()


def hostile_bodies() -> dict[str, tuple[str, bytes]]:
    return {
        "32 MB completion": ("/v1/completions", json.dumps({"prompt": HOSTILE_TEXT, "max_tokens": 4}).encode()),
        "32 MB chat": ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": HOSTILE_TEXT}],
                                                           "max_tokens": 4}).encode()),
        # under the body bound, over the byte bound: parsed, refused before the engine
        "1 MB completion": ("/v1/completions", json.dumps({"prompt": "hello world " * 87_000,
                                                           "max_tokens": 4}).encode()),
        # under the byte bound, over the slot's tokens: tokenized beside the decode loop, then refused
        "36 kB completion": ("/v1/completions", json.dumps({"prompt": "hello world " * 3000,
                                                            "max_tokens": 4}).encode()),
    }


def attacker(port: int, label: str) -> None:
    """A hostile client in its own process (`python _serve_hostile.py PORT LABEL`), so that its uploads do
    not compete with the measured stream's reader for one interpreter: it builds its body, says "ready",
    sends it on a line from stdin and prints the status."""
    path, body = hostile_bodies()[label]
    print("ready", flush=True)
    sys.stdin.readline()
    print(post(port, path, body)[0], flush=True)


def measure(port: int, labels: list[str]) -> tuple[list[int], float, float]:
    """One attacker process per label, sending at once while a stream runs: their statuses, how long from
    the signal to the last answer, and the stream's longest gap meanwhile. The attackers start and build
    their bodies before the clock does."""
    watched = Watched(port)
    watched.start()
    deadline = time.monotonic() + 120
    while len(watched.times) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    procs = [subprocess.Popen([sys.executable, __file__, str(port), label], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for label in labels]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    start = time.monotonic()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    statuses = []
    for proc in procs:
        assert proc.stdout is not None
        statuses.append(int(proc.stdout.readline() or 0))
    end = time.monotonic()
    for proc in procs:
        proc.wait(60)
    time.sleep(0.5)
    watched.done = True
    return statuses, end - start, watched.longest_gap(start, end)


def report(name: str, port: int) -> list[str]:
    """One table row per hostile case on the server at `port`."""
    rows = []
    cases = {label: [label] for label in hostile_bodies()}
    cases["4 × 32 MB completions at once"] = ["32 MB completion"] * 4
    for label, labels in cases.items():
        statuses, took, gap = measure(port, labels)
        rows.append(f"| {name} | {label} | {', '.join(map(str, sorted(statuses)))} | {took:.2f} | {gap:.2f} | "
                    f"{'met' if gap < TARGET_GAP_S else 'NOT met'} |")
    ok, _ = post(port, "/v1/completions", json.dumps({"prompt": "Hi", "max_tokens": 2}).encode(), timeout=120)
    rows.append(f"| {name} | an ordinary request right after | {ok} | | | |")
    return rows


def print_report(servers: list[tuple[str, int]]) -> None:
    print(f"| server | hostile request | status | took s | other stream's longest gap s | gap < {TARGET_GAP_S:g} s |")
    print("|---|---|---|---|---|---|")
    for name, port in servers:
        for row in report(name, port):
            print(row, flush=True)


if __name__ == "__main__":
    attacker(int(sys.argv[1]), sys.argv[2])
