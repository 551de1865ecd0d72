"""A `roofline serve` process on the real default model for tests: start it on a free loopback port, talk
to it with the real `openai` client or raw HTTP, read its /metrics, stop it."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEY = "sk-serve-test"


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    port: int
    model: str

    def client(self, **kw: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", KEY), max_retries=0,
                             timeout=kw.pop("timeout", 120), **kw)

    def raw(self, method: str, path: str, body: bytes | None = None,
            key: str | None = KEY) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            conn.request(method, path, body, headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def metrics(self) -> dict[str, float]:
        status, text = self.raw("GET", "/metrics")
        assert status == 200
        return {ln.split(" ")[0]: float(ln.split(" ")[1]) for ln in text.decode().splitlines()
                if ln and not ln.startswith("#")}

    def engine_pid(self) -> int:
        import psutil

        kids = [p for p in psutil.Process(self.proc.pid).children()
                if "app.engine.llama.batch" in " ".join(p.cmdline())]
        assert len(kids) == 1
        return int(kids[0].pid)

    def wait_metric(self, name: str, ok: Any, timeout: float = 20.0) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            if ok(m[name]) or time.monotonic() > deadline:
                return m
            time.sleep(0.1)


@contextmanager
def serve(model: Path, home: Path, *options: str) -> Iterator[Served]:
    """`roofline serve` on `model` (loopback, a free port, key KEY) with `options`, stopped on exit."""
    env = {**os.environ, "ROOFLINE_HOME": str(home), "ROOFLINE_DEFAULT_MODEL": str(model)}
    env.pop("ROOFLINE_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                             "-t", "2", "--api-key", KEY, *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""))
    reader.start()
    reader.join(120)
    try:
        if not line or "listening on http://127.0.0.1:" not in line[0]:
            proc.kill()
            raise AssertionError(f"roofline serve did not start: {line!r} "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        url = line[0].split("listening on ")[1].split()[0].removesuffix("/v1")
        yield Served(proc, url, int(url.rsplit(":", 1)[1]), model.name)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def sse_events(resp: http.client.HTTPResponse) -> Iterator[Any]:
    for raw in resp:
        line = raw.strip()
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            yield "[DONE]" if payload == b"[DONE]" else json.loads(payload)


def open_stream(served: Served, body: dict[str, Any]) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=120)
    conn.request("POST", "/v1/chat/completions" if "messages" in body else "/v1/completions",
                 json.dumps({**body, "stream": True}).encode(),
                 {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    return conn, conn.getresponse()
