"""The engine process around `Engine`: the protocol stream, a reader thread that queues stdin's commands
(so a `cancel` is seen between two tokens), a watch that exits when the parent app is gone, a lower CPU
priority when asked, and the `Ready` event. The batch engine process (app.engine.llama.batch) uses the same parts.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import llama_cpp

from app.engine import protocol as P
from app.engine.llama.backends import cpu_backend, load_backends
from app.engine.llama.devices import list_backends, list_devices
from app.engine.llama.worker.engine import Engine
from app.engine.llama.worker.stream import send, setup_streams


def stdin_reader(inbox: queue.Queue[Any], decode: Callable[[bytes], Any] = P.decode) -> None:
    for raw in sys.stdin.buffer:
        try:
            inbox.put(decode(raw))
        except P.ProtocolError as exc:
            send(P.Error(None, "protocol", str(exc)))
    inbox.put(P.Shutdown())  # the app closed our stdin (or died): stop instead of lingering as an orphan


def watch_parent() -> None:
    """Exit when the app that started us is gone, even mid-prefill or mid-benchmark (when stdin EOF is not
    noticed until the current llama.cpp call returns): an orphan engine would hold GBs of memory."""
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def lower_priority(value: str | None) -> None:
    """Run below normal CPU priority when asked (the desktop app asks: ROOFLINE_ENGINE_NICE=5).

    On a machine with few cores llama.cpp's threads occupy every core; at equal priority the window waits
    its turn behind them. A little lower priority lets the window, and the rest of the desktop, run first
    when they need to; they need little, so decode speed is unchanged (on 2 cores: event-loop p99 stall
    4.6 -> 2.4 ms; scripts/bench_gui, docs/bench/2026-11-29-gui-streaming.md)."""
    try:
        n = int(value or 0)
    except ValueError:
        return
    if n <= 0:
        return
    try:
        if hasattr(os, "nice"):
            os.nice(n)
        else:  # Windows
            import psutil

            psutil.Process().nice(psutil.BELOW_NORMAL_PRIORITY_CLASS)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a priority we cannot lower is not worth failing the engine for
        pass


def announce_ready() -> None:
    """Register ggml's loadable backends (a portable build's CPU code is a module in llama_cpp/lib that ggml
    would not find by itself), then tell the parent this process is ready and what it runs on."""
    load_backends()
    send(P.Ready(pid=os.getpid(), llama_cpp_version=llama_cpp.__version__, cpu_backend=cpu_backend().describe(),
                 system_info=llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
                 gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
                 devices=[asdict(d) for d in list_devices()], backends=list_backends()))


def exit_now(code: int) -> None:
    """Leave without the interpreter's shutdown. The stdin reader, a daemon thread, sits in a read that holds
    stdin's lock; finalizing the interpreter then aborts the process (SIGABRT, "_enter_buffered_busy") after a
    clean Shutdown, so the parent saw a crash. Every event is flushed by `send`; the OS frees the rest."""
    sys.stderr.flush()
    os._exit(code)


def main() -> int:
    setup_streams()
    lower_priority(os.environ.get("ROOFLINE_ENGINE_NICE"))
    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    inbox: queue.Queue[Any] = queue.Queue()
    engine = Engine(inbox)
    threading.Thread(target=stdin_reader, args=(inbox,), name="stdin", daemon=True).start()
    announce_ready()
    engine.serve()
    engine.unload()
    return 0

