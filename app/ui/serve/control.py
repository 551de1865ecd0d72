"""The window's Serve switch: one `roofline serve` process on the loaded model, owned by one object.

`ServeControl.start(model)` runs `roofline serve` (the CLI, in its own process: a crash of the server or of
its engine never touches the window) on loopback, on the port asked for or, when that one is taken, on any
free port; the URL it prints is the one shown. It is given the window's pid (`--parent-pid`) and stops by
itself when the window is gone, even after a kill -9 that runs none of the window's shutdown. While it
runs, /metrics is polled every POLL_MS off the GUI thread (app.ui.toolkit.background) and each poll becomes
a `Traffic` snapshot (app.core.metrics.serve_traffic) for the status bar and the dashboard. `stop()` ends
it (SIGTERM, then SIGKILL); a server that ends on its own is reported through `died` with its last words.

Memory: the server loads its own copy of the model. Its weights are a read-only mapping of the same file,
which the OS shares with the chat engine's, so the extra is mostly the server's KV cache (`--ctx` cells for
all slots) and compute buffers, plus weights that llama.cpp repacks into private memory on the CPU;
`extra_memory` estimates it with app.core.predict.memory. The chat engine stays loaded while serving: chat and
served requests can then be compared side by side and serving costs no reload; the window unloads the chat
model only when the estimate does not fit in the memory available (see main_window's serve switch).
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import time
import urllib.request
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from app.core.config.defaults import DEFAULT_SERVE_PORT
from app.core.config.network import is_loopback  # the CLI's rule, word for word
from app.core.metrics.serve_traffic import Traffic, parse_metrics, traffic
from app.ui.toolkit.background import run_in_background

POLL_MS = 1000  # /metrics this often: a few hundred bytes a second, invisible beside a decode step
RATE_WINDOW_S = 5.0  # the aggregate rate is taken over this long (the server counts a reply's tokens at its end)
STOP_WAIT_MS = 5000
START_TIMEOUT_S = 300.0


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True


def extra_memory(model: Path, ctx: int, parallel: int) -> int | None:
    """Bytes the server would add beside the chat engine (its KV cache, compute buffers and repacked
    weights; the mapped weights are shared through the OS page cache), or None if the file cannot be read."""
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.memory import MemoryConfig, estimate_memory

    try:
        est = estimate_memory(inspect_gguf(model), MemoryConfig(n_ctx=ctx, n_seq=parallel), has_gpu=False)
    except (OSError, ValueError):
        return None
    return int(est.total - est.cpu.weights - est.gpu.weights)


class ServeControl(QObject):
    state_changed = Signal(str)  # "stopped" | "starting" | "serving"
    url_changed = Signal(str)  # the base URL (…/v1) once it listens, "" when stopped
    traffic = Signal(object)  # Traffic, once per poll
    died = Signal(str)  # the server ended without being asked: why, in one line

    def __init__(self, parent: QObject | None = None, *, host: str = "127.0.0.1", port: int = DEFAULT_SERVE_PORT,
                 parallel: int = 4, ctx: int = 8192, threads: int | None = None, api_key: str | None = None,
                 command: list[str] | None = None) -> None:
        super().__init__(parent)
        self.host, self.port, self.parallel, self.ctx = host, port, parallel, ctx
        self.threads, self.api_key = threads, api_key
        self._command = command or [sys.executable, "-m", "app.cli", "serve"]
        self.state = "stopped"
        self.url = ""
        self.model: Path | None = None
        self.last: Traffic | None = None
        self._proc: QProcess | None = None
        self._stopping = False
        self._out = b""
        self._err: collections.deque[str] = collections.deque(maxlen=8)
        self._polls: collections.deque[tuple[float, dict[str, float]]] = collections.deque()
        self._polling = False
        self._started_at = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    # ------------------------------------------------------------------ switch
    def check(self) -> str | None:
        """One line saying why the server may not start as configured, or None."""
        if not is_loopback(self.host) and not self.api_key:
            return (f"Refusing to serve on {self.host} without an API key: anyone who can reach this machine "
                    "could use the model. Set an API key, or keep 127.0.0.1.")
        if not 1 <= self.parallel <= 64 or self.ctx // max(1, self.parallel) < 64:
            return "The server needs 1 to 64 slots of at least 64 tokens each."
        return None

    def start(self, model: Path) -> str | None:
        """Start serving `model`; returns why not (one line), or None when the process is starting."""
        if self._proc is not None:
            return "The server is already running: stop it first."
        problem = self.check()
        if problem:
            return problem
        port = self.port if self.port and port_free(self.host, self.port) else 0
        args = [*self._command, "-m", str(model), "--host", self.host, "--port", str(port),
                "--parallel", str(self.parallel), "--ctx", str(self.ctx), "--parent-pid", str(os.getpid())]
        if self.threads:
            args += ["-t", str(self.threads)]
        env = QProcessEnvironment.systemEnvironment()
        if self.api_key:
            env.insert("ROOFLINE_API_KEY", self.api_key)  # never on the command line: other users could read it
        proc = QProcess(self)
        proc.setProcessEnvironment(env)
        proc.readyReadStandardOutput.connect(self._read_out)
        proc.readyReadStandardError.connect(self._read_err)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._failed_to_start)
        self._proc, self.model, self._stopping, self._out = proc, model, False, b""
        self._err.clear()
        self._polls.clear()
        self._started_at = time.monotonic()
        self._set_state("starting")
        proc.start(args[0], args[1:])
        return None

    def stop(self) -> None:
        """Stop the server (blocking for at most a few seconds); nothing happens when none runs."""
        proc = self._proc
        if proc is None:
            return
        self._stopping = True
        self._timer.stop()
        if proc.state() != QProcess.ProcessState.NotRunning:
            proc.terminate()
            if not proc.waitForFinished(STOP_WAIT_MS):
                proc.kill()
                proc.waitForFinished(STOP_WAIT_MS)
        self._ended()

    @property
    def running(self) -> bool:
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        return int(self._proc.processId()) if self._proc is not None else None

    # ------------------------------------------------------------------ the process
    def _read_out(self) -> None:
        if self._proc is None:
            return
        self._out += bytes(self._proc.readAllStandardOutput().data())
        if self.state == "starting" and b"listening on " in self._out:
            line = self._out.split(b"listening on ", 1)[1].split(b"\n", 1)[0].decode("utf-8", "replace")
            self.url = line.split()[0] if line.split() else ""
            self._set_state("serving")
            self.url_changed.emit(self.url)
            self._timer.start()
            self._poll()

    def _read_err(self) -> None:
        if self._proc is None:
            return
        text = bytes(self._proc.readAllStandardError().data()).decode("utf-8", "replace")
        self._err.extend(line for line in text.splitlines() if line.strip())

    def _finished(self, code: int, _status: object) -> None:
        if self._stopping or self._proc is None:
            return
        self._read_err()
        last = self._err[-1] if self._err else f"exit status {code}"
        was = "stopped" if self.state == "serving" else "could not start"
        self._ended()
        self.died.emit(f"The server {was}: {last}")

    def _failed_to_start(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and not self._stopping and self._proc is not None:
            self._ended()
            self.died.emit("The server could not be started (the Python interpreter was not found).")

    def _ended(self) -> None:
        self._timer.stop()
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.deleteLater()
        self.url, self.last = "", None
        self.url_changed.emit("")
        self._set_state("stopped")

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)

    # ------------------------------------------------------------------ polling /metrics
    def _poll(self) -> None:
        if self._polling or not self.url:
            return
        self._polling = True
        url = self.url.removesuffix("/v1") + "/metrics"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

        def fetch() -> tuple[float, dict[str, float]]:
            req = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(req, timeout=2.0) as resp:
                text = resp.read(1 << 20).decode("utf-8", "replace")
            return time.monotonic(), parse_metrics(text)

        def done(result: tuple[float, dict[str, float]]) -> None:
            self._polling = False
            if self._proc is None:
                return
            t, metrics = result
            while self._polls and t - self._polls[0][0] > RATE_WINDOW_S:
                self._polls.popleft()
            before = self._polls[0] if self._polls else None
            self._polls.append((t, metrics))
            self.last = traffic(metrics, t, before[1] if before else None, before[0] if before else None)
            self.traffic.emit(self.last)

        def failed(_exc: BaseException) -> None:
            self._polling = False  # a slow or restarting server: the next poll tries again

        run_in_background(self, fetch, done, failed, name="serve-metrics")

