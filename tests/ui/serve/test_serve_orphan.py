"""A window killed with SIGKILL takes its server with it: the Serve switch's `roofline serve` (and that
server's engine) must not stay on the port and in memory after the window is gone. The window here is
tests/helpers/serve_window.py, a process of its own that can be killed like the real one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

HELPERS = Path(__file__).resolve().parents[2] / "helpers"
FAKE = [sys.executable, str(HELPERS / "fake_serve.py")]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _serving_window(model: str, command: list[str] | None, timeout: float) -> tuple[subprocess.Popen[str], int]:
    args = [sys.executable, str(HELPERS / "serve_window.py"), model]
    if command:
        args.append(json.dumps(command))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    window = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert window.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = window.stdout.readline()
        if line.startswith("serving "):
            return window, int(line.split()[1])
        if not line or line.startswith(("died", "refused")):
            break
    window.kill()
    raise AssertionError(f"the server did not start: {line!r}")


def _kill_and_wait(window: subprocess.Popen[str], pids: list[int], timeout: float) -> list[int]:
    os.kill(window.pid, signal.SIGKILL)  # no shutdown code of the window runs
    window.wait(10)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.2)
    left = [pid for pid in pids if not _gone(pid)]
    for pid in left:  # don't leave one behind for the next test
        os.kill(pid, signal.SIGKILL)
    return left


def test_the_server_dies_with_a_killed_window() -> None:
    window, server = _serving_window("/models/fake-Q4_K_M.gguf", FAKE, timeout=60)
    assert _kill_and_wait(window, [server], timeout=15) == []


@pytest.mark.model
def test_the_real_server_and_its_engine_die_with_a_killed_window(default_model: Path, roofline_home: Path) -> None:
    window, server = _serving_window(str(default_model), None, timeout=240)
    engines = [child.pid for child in psutil.Process(server).children(recursive=True)]
    assert engines, "roofline serve runs its engine in a child process"
    assert _kill_and_wait(window, [server, *engines], timeout=30) == []
