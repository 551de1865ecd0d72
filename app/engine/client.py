"""The app's side of the engine: starts the engine process and turns its output into events.

No Qt and no llama_cpp here: the CLI uses the blocking helpers (`load`, `generate`, `bench`), the GUI wraps
this in a QObject and receives events through `on_event` on a reader thread. Whatever happens to the
child (a crash in native code, SIGKILL, OOM, garbage on its stdout) becomes an `Error` event with
`fatal=True`; the caller never hangs and never crashes.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from app.engine import protocol as P
from app.engine.limits import supported as limits_supported


class EngineError(RuntimeError):
    def __init__(self, error: P.Error):
        super().__init__(error.message)
        self.error = error


def worker_command() -> list[str]:
    """How to start the engine: the module under Python, or the frozen app with a flag."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--engine-worker"]
    return [sys.executable, "-u", "-m", "app.engine.llama.worker"]


def describe_exit(code: int | None) -> str:
    if code is None:
        return "is not responding"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {
            "SIGKILL": " (killed: by the user, or by the system for lack of memory)",
            "SIGSEGV": " (a crash in native code: often a corrupt or unsupported model file)",
            "SIGILL": " (an instruction this CPU lacks: llama.cpp was built for another CPU)",
            "SIGABRT": " (llama.cpp aborted: see the log below)",
            "SIGXCPU": " (it used up its CPU-time limit: a request that ran for hours)",
        }.get(name, "")
        return f"was stopped by {name}{hint}"
    return f"exited with code {code}"


class EngineClient:
    """Owns one engine process. Thread-safe `send`; events via `on_event` or the blocking helpers."""

    def __init__(self, on_event: Callable[[Any], None] | None = None, env: dict[str, str] | None = None,
                 nice: int = 0):
        self._on_event = on_event
        self._env = env
        self.nice = nice  # > 0: the engine runs at a lower CPU priority (see worker.lower_priority)
        self._events: queue.Queue[Any] = queue.Queue()
        self._proc: subprocess.Popen[bytes] | None = None
        self._send_lock = threading.Lock()
        self._closing = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.ready: P.Ready | None = None
        self.loaded: P.Loaded | None = None
        self._counter = 0
        self._as_limit: int | None = None  # the engine's address-space limit for the model being loaded
        self._sizing: threading.Thread | None = None  # computing _as_limit

    # ------------------------------------------------------------------ process lifetime
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
            self.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),  # Windows: no console window per engine
        )
        proc = self._proc
        threading.Thread(target=self._read_stdout, args=(proc,), name="engine-reader", daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), name="engine-stderr", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def kill(self) -> None:
        """SIGKILL the engine (tests, and the GUI's last resort when it stops answering)."""
        if self._proc and self._proc.poll() is None:
            self._proc.kill()

    def close(self, timeout: float = 5.0) -> None:
        """Ask the engine to shut down; kill it if it does not within `timeout`."""
        proc = self._proc
        if proc is None:
            return
        self._closing = True
        if proc.poll() is None:
            try:
                self.send(P.Shutdown())
            except OSError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def __enter__(self) -> EngineClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sending
    def send(self, command: Any) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            raise EngineError(P.Error(None, "engine_died", "the engine is not running", fatal=True))
        line = (P.encode(command) + "\n").encode()
        self._limit(command, proc.pid)
        with self._send_lock:
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise EngineError(P.Error(None, "engine_died", f"the engine is gone ({exc})", fatal=True)) from exc

    def _limit(self, command: Any, pid: int) -> None:
        """Resource limits for what `command` starts (see app/engine/limits.py); never stops the command."""
        from app.engine import limits

        if not limits.supported():
            return
        try:
            if isinstance(command, P.Load):
                # Sizing reads the model's header (a few hundred ms for a large vocabulary): not on the
                # caller's thread, which may be the GUI's; it runs beside the load, which takes longer.
                self._sizing = threading.Thread(target=self._size_as_limit, args=(command.config, pid),
                                                name="engine-limits", daemon=True)
                self._sizing.start()
            elif isinstance(command, (P.Generate, P.Bench)):
                if self._sizing is not None:
                    self._sizing.join(5.0)  # a template is rendered only under the limit (rarely waits)
                limits.set_cpu_budget(pid, limits.request_cpu_budget())
        except (OSError, ValueError):
            pass  # the process is gone or /proc is unreadable: the send itself reports a dead engine

    def _size_as_limit(self, config: P.LoadConfig, pid: int) -> None:
        from app.engine import limits

        self._as_limit = limits.address_space_for(config.model_path, config)
        if self.ready is not None:  # else applied when Ready says whether a GPU backend is in use
            try:
                self._apply_as_limit(pid)
            except (OSError, ValueError):
                pass  # the engine is gone

    def _apply_as_limit(self, pid: int) -> None:
        from app.engine import limits

        if self._as_limit is not None and self.ready is not None and not self.ready.gpu_offload:
            limits.set_address_space(pid, self._as_limit)

    def new_request_id(self, prefix: str = "r") -> str:
        self._counter += 1
        return f"{prefix}{os.getpid()}-{self._counter}-{time.monotonic_ns() % 1_000_000}"

    # ------------------------------------------------------------------ receiving
    def _emit(self, event: Any) -> None:
        if isinstance(event, P.Ready):
            self.ready = event
            if self._proc is not None and limits_supported():
                try:
                    self._apply_as_limit(self._proc.pid)
                except (OSError, ValueError):
                    pass
        elif isinstance(event, P.Loaded):
            self.loaded = event
        if self._on_event is not None:
            self._on_event(event)
        else:
            self._events.put(event)

    def command(self) -> list[str]:
        """The engine process to start (the batch engine's client starts another)."""
        return worker_command()

    def decode(self, raw: bytes) -> Any:
        """One protocol line from the engine as an event (the batch engine adds event types)."""
        return P.decode(raw)

    def _read_stdout(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = self.decode(raw)
            except P.ProtocolError as exc:
                self._stderr_tail.append(f"[protocol] {exc}")
                continue
            self._emit(event)
        code = proc.wait()
        if proc is self._proc and not self._closing:
            # Give the stderr reader a moment to collect llama.cpp's last words.
            time.sleep(0.05)
            tail = "\n".join(list(self._stderr_tail)[-8:])
            message = f"The engine process {describe_exit(code)}."
            if tail:
                message += "\n" + tail
            self.loaded = None
            self._emit(P.Error(None, "engine_died", message, fatal=True))

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            self._stderr_tail.append(raw.decode(errors="replace").rstrip())

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr_tail)

    # ------------------------------------------------------------------ blocking helpers (CLI, tests)
    def next_event(self, timeout: float | None = None) -> Any:
        if self._on_event is not None:
            raise RuntimeError("events go to on_event; blocking helpers are unavailable")
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            raise EngineError(P.Error(None, "timeout", f"no answer from the engine in {timeout:.0f} s")) from None

    def wait_for(self, kinds: tuple[type, ...], timeout: float = 120.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            event = self.next_event(max(0.01, deadline - time.monotonic()))
            if isinstance(event, kinds):
                return event
            if isinstance(event, P.Error):
                raise EngineError(event)

    def load(self, config: P.LoadConfig, timeout: float = 300.0) -> P.Loaded:
        self.start()
        self.send(P.Load(config))
        return self.wait_for((P.Loaded,), timeout)  # type: ignore[no-any-return]

    def generate(self, request: P.Generate, timeout: float = 600.0) -> Iterator[Any]:
        """Yield Token events, then the Done event. Raises EngineError on an Error."""
        self.send(request)
        deadline = time.monotonic() + timeout
        while True:
            event = self.next_event(max(0.01, deadline - time.monotonic()))
            if isinstance(event, P.Error):
                raise EngineError(event)
            if getattr(event, "request_id", None) != request.request_id:
                continue
            yield event
            if isinstance(event, P.Done):
                return

    def bench(self, request: P.Bench, timeout: float = 1800.0) -> P.BenchResult:
        self.send(request)
        return self.wait_for((P.BenchResult,), timeout)  # type: ignore[no-any-return]

    def stats(self, timeout: float = 30.0) -> P.Stats:
        self.send(P.GetStats())
        return self.wait_for((P.Stats,), timeout)  # type: ignore[no-any-return]
