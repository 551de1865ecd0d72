"""A fake serving engine on loopback for the metrics poller's tests: it answers GET paths with bodies a test
sets (a recorded exposition, Ollama's JSON), or misbehaves on /metrics — a body that never ends, one that
stalls until released, one that drips a byte at a time — and streams a short chat reply on POST, so a test
can chat with the same server while its /metrics misbehaves."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from loopback_http import LoopbackServer, serve_on_loopback


@dataclass
class FakeEngine:
    # path -> body (text/plain for .prom-like, else JSON); "/v1/models" replaces the one-model default list
    bodies: dict[str, str] = field(default_factory=dict)
    after_chat: dict[str, str] = field(default_factory=dict)  # bodies that replace those once a reply is sent
    metrics_mode: str = ""  # "", "endless", "stall", "drip"
    release: threading.Event = field(default_factory=threading.Event)  # ends a stall
    tokens: list[str] = field(default_factory=lambda: ["Hello", " there"])
    requests: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer  # its state: this fake's
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _misbehave(self, mode: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            if mode == "endless":
                line = b'vllm:num_requests_running{model_name="m"} 1\n' * 1024
                for _ in range(100_000):
                    self.wfile.write(line)
            elif mode == "stall":
                self.server.state.release.wait(60)
            elif mode == "drip":
                for _ in range(600):
                    self.wfile.write(b"#")
                    self.wfile.flush()
                    time.sleep(0.1)
        except OSError:
            pass

    def do_GET(self) -> None:
        st = self.server.state
        st.requests.append(self.path)
        if self.path == "/metrics" and st.metrics_mode:
            return self._misbehave(st.metrics_mode)
        if self.path.rstrip("/").endswith("/v1/models") and self.path not in st.bodies:
            return self._body(200, json.dumps({"data": [{"id": "fake-model"}]}).encode(), "application/json")
        body = st.bodies.get(self.path)
        if body is None:
            return self._body(404, b"not found", "text/plain")
        kind = "application/json" if body.lstrip().startswith(("{", "[")) else "text/plain; version=0.0.4"
        self._body(200, body.encode(), kind)

    def do_POST(self) -> None:
        st = self.server.state
        st.requests.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for text in st.tokens:
            chunk = {"choices": [{"delta": {"content": text}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        done = {"choices": [{"delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": len(st.tokens)}}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        st.bodies.update(st.after_chat)


@pytest.fixture
def fake_engine() -> Iterator[tuple[str, FakeEngine]]:
    state = FakeEngine()
    with serve_on_loopback(_Handler, state) as url:
        yield url, state
        state.release.set()  # held replies end before the server shuts down
