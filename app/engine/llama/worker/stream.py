"""The protocol stream of the engine process: events as JSON lines on a private copy of stdout.

`setup_streams` duplicates fd 1 for the protocol and points fd 1 at stderr, so nothing native code prints can
corrupt the stream. Token events leave in bursts (`TokenOut`). No llama_cpp here.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

from app.engine import protocol as P

# The protocol stream: the real stdout, which llama.cpp's own prints can no longer reach (see below).
_out: IO[str]


def setup_streams() -> None:
    global _out
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    _out = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
    sys.stdout = sys.stderr


_send_lock = threading.Lock()


def send(event: Any) -> None:
    send_lines([P.encode(event)])


def send_lines(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    with _send_lock:
        _out.write(text)
        _out.flush()


BURST_MS = 25  # the default gap between token bursts; a request may ask for another (up to MAX_BURST_MS)
MAX_BURST_MS = 250


def burst_interval_s(requested_ms: int | None) -> float:
    """Seconds between token bursts for a request: its own wish within [0, MAX_BURST_MS], else BURST_MS."""
    ms = BURST_MS if requested_ms is None else min(max(int(requested_ms), 0), MAX_BURST_MS)
    return ms / 1000.0


class TokenOut:
    """Token events leave in bursts: one pipe write, and one wake-up of the app's reader thread, per
    `interval_s` instead of per token. On a 2-core machine every wake-up of the app takes a core from
    llama.cpp mid-token. The first token leaves at once (it is the user's TTFT); every token keeps its own
    timestamp, so ITL is exact; the view batches to ≤ 30 updates/s anyway."""

    def __init__(self, interval_s: float = BURST_MS / 1000.0) -> None:
        self.interval_s = interval_s
        self.lines: list[str] = []
        self.sent_at: float | None = None

    def add(self, event: P.Token) -> None:
        self.lines.append(P.encode(event))
        if self.sent_at is None or event.t - self.sent_at >= self.interval_s:
            self.flush(event.t)

    def flush(self, now: float | None = None) -> None:
        if self.lines:
            send_lines(self.lines)
            self.lines = []
            self.sent_at = time.monotonic() if now is None else now
