"""The engine processes end cleanly on `Shutdown` while the parent still holds their stdin open (as EngineClient
does until it has read the last event): exit code 0, not the interpreter's abort at shutdown over the stdin
reader's lock, which the parent took for a crash."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.engine import protocol as P


@pytest.mark.parametrize("module", ["app.engine.llama.worker", "app.engine.llama.batch"])
def test_shutdown_with_stdin_open_exits_zero(module: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        ready = P.decode(proc.stdout.readline())
        assert isinstance(ready, P.Ready)
        proc.stdin.write((P.encode(P.Shutdown()) + "\n").encode())
        proc.stdin.flush()
        code = proc.wait(timeout=60)  # stdin stays open until after the exit
        assert code == 0, proc.stderr.read().decode(errors="replace")[-400:]
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
