"""llama-cpp-python's own OpenAI-compatible server on loopback, started on the real default model: the remote
backend's counterpart in the tests (`server` fixture in conftest.py, one per test module that uses it)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

KEY = "sk-test-roofline"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(model: Path, api_key: str | None = KEY) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "1024", "--n_threads", "2", "--chat_format", "gemma"]
    if api_key:
        cmd += ["--api_key", api_key]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("llama_cpp.server exited at start-up")
        try:
            req = urllib.request.Request(url + "/v1/models", headers={"Authorization": f"Bearer {api_key}"})
            urllib.request.urlopen(req, timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("llama_cpp.server did not come up in 90 s")
