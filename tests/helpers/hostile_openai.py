"""A hostile OpenAI-compatible server on loopback, for the remote backend's security tests.

Modes (set on `HostileState`): an endless `/v1/models` body, or one given as raw JSON; model ids and streamed
tokens carrying terminal escape sequences; a server-sent-events line that never ends; a flood of large events
of answer or reasoning text; a last chunk given as raw JSON (hostile `usage` or `timings` numbers). Endless
bodies stop at ENDLESS_LIMIT, a flood after `flood_events`, either when the client hangs up (`hung_up` is
then set), and every byte sent is counted. It records each request's Authorization header and, when
`watch_pid` is set, that process's command line at the moment the request arrived.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from loopback_http import LoopbackServer, serve_on_loopback

ENDLESS_LIMIT = 256 << 20
ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31m\rEVIL\x9b1;1H\x1b[0m"


@dataclass
class HostileState:
    endless_models: bool = False
    endless_line: bool = False
    stream_content_type: str = "text/event-stream"  # what a streamed reply says it is
    model_id: str = "plain-model"
    tokens: list[str] = field(default_factory=lambda: ["Hello", ", world"])
    sent: int = 0
    auth: list[str | None] = field(default_factory=list)
    watch_pid: int | None = None
    cmdlines: list[str] = field(default_factory=list)
    models_json: str | None = None  # the /v1/models body as sent, instead of one listing `model_id`
    flood: str = ""  # "content" or "reasoning_content": stream `flood_events` events of that much text first
    flood_events: int = 3000
    flood_size: int = 1_000_000
    last_chunk: str | None = None  # the JSON of the chunk before [DONE], as sent (numbers JSON cannot write)
    hung_up: threading.Event = field(default_factory=threading.Event)  # the client closed a stream mid-flood


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer  # its state: this fake's
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _note(self) -> None:
        st = self.server.state
        st.auth.append(self.headers.get("Authorization"))
        if st.watch_pid:
            try:
                st.cmdlines.append(Path(f"/proc/{st.watch_pid}/cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                pass

    def _send(self, data: bytes) -> None:
        self.wfile.write(data)
        self.server.state.sent += len(data)

    def _endless(self, head: bytes, filler: bytes, content_type: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self._send(head)
            while self.server.state.sent < ENDLESS_LIMIT:
                self._send(filler)
        except OSError:
            return  # the client stopped reading: what it should do

    def do_GET(self) -> None:
        self._note()
        if self.path.rstrip("/").endswith("/v1/models"):
            if self.server.state.endless_models:
                return self._endless(b'{"data": [', b'{"id": "m"}, ' * 4096)
            models = self.server.state.models_json
            body = (models or json.dumps({"data": [{"id": self.server.state.model_id}]})).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self._send(body)
            return
        self.send_error(404)

    def do_POST(self) -> None:
        self._note()
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        st = self.server.state
        if st.endless_line:
            head = b'data: {"choices": [{"delta": {"content": "'
            return self._endless(head, b"A" * 65536, st.stream_content_type)
        self.send_response(200)
        self.send_header("Content-Type", st.stream_content_type)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if st.flood:
            event = f"data: {json.dumps({'choices': [{'delta': {st.flood: 'A' * st.flood_size}}]})}\n\n".encode()
            try:
                for _ in range(st.flood_events):
                    self._send(event)
            except OSError:
                st.hung_up.set()
                return
        for text in st.tokens:
            chunk = {"choices": [{"delta": {"content": text}, "finish_reason": None}]}
            self._send(f"data: {json.dumps(chunk)}\n\n".encode())
        done = st.last_chunk or json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}],
                                            "usage": {"prompt_tokens": 3, "completion_tokens": len(st.tokens)}})
        self._send(f"data: {done}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def hostile_server() -> Iterator[tuple[str, HostileState]]:
    state = HostileState()
    with serve_on_loopback(_Handler, state) as url:
        yield url, state
