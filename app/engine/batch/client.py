"""The server's side of the batch engine: starts `python -m app.engine.batch` and relays its events.

No llama_cpp here. It is the single-request `EngineClient` with another process and two more event types:
starting and loading are blocking (`start_loaded`), after which every event goes to `on_event` on the
reader thread. A dead engine becomes one `Error(fatal=True)` event, as in EngineClient; the server fails
the requests in flight and calls `start_loaded` again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from app.engine import protocol as P
from app.engine.batch import messages as M
from app.engine.client import EngineClient, describe_exit


def batch_engine_command(parallel: int) -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "--batch-engine", "--parallel", str(parallel)]
    return [sys.executable, "-u", "-m", "app.engine.batch", "--parallel", str(parallel)]


class BatchEngineClient(EngineClient):
    def __init__(self, parallel: int, env: dict[str, str] | None = None, nice: int = 0) -> None:
        super().__init__(on_event=None, env=env, nice=nice)
        self.parallel = parallel
        self._relay: Callable[[Any], None] | None = None

    def start(self) -> None:
        if self.alive:
            return
        self._closing = False
        self.ready = None
        self.loaded = None
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.nice > 0:
            env["ROOFLINE_ENGINE_NICE"] = str(self.nice)
        self._proc = subprocess.Popen(
            batch_engine_command(self.parallel), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, close_fds=True,
            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
        proc = self._proc
        threading.Thread(target=self._read_stdout, args=(proc,), name="batch-reader", daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), name="batch-stderr", daemon=True).start()

    def start_loaded(self, config: P.LoadConfig, on_event: Callable[[Any], None],
                     timeout: float = 300.0) -> P.Loaded:
        """Start the process, load the model (blocking), then relay every event to `on_event`.

        Raises EngineError if the model does not load; the process is then closed."""
        self._on_event = None  # the blocking helpers read the queue while loading
        self._relay = None
        try:
            loaded = self.load(config, timeout)
        except Exception:
            self.close()
            raise
        self._relay = on_event
        while not self._events.empty():  # whatever came between Loaded and now (stats)
            on_event(self._events.get_nowait())
        return loaded

    def _emit(self, event: Any) -> None:
        if isinstance(event, P.Ready):
            self.ready = event
        elif isinstance(event, P.Loaded):
            self.loaded = event
        relay = self._relay
        if relay is not None:
            relay(event)
        else:
            self._events.put(event)

    def _read_stdout(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = M.decode(raw)
            except P.ProtocolError as exc:
                self._stderr_tail.append(f"[protocol] {exc}")
                continue
            self._emit(event)
        code = proc.wait()
        if proc is self._proc and not self._closing:
            tail = "\n".join(list(self._stderr_tail)[-8:])
            message = f"The engine process {describe_exit(code)}."
            if tail:
                message += "\n" + tail
            self.loaded = None
            self._emit(P.Error(None, "engine_died", message, fatal=True))
