"""A fake Ollama on loopback speaking its native API as Ollama writes it, for the remote backend, the CLI and the
window: no Ollama ran to make it; each shape is written from Ollama's source (github.com/ollama/ollama):

- `api/types.go`: ChatRequest (model, messages, stream, options), GenerateRequest (prompt, raw); the
  stream's objects, ChatResponse (model, created_at, message {role, content, thinking}, done, done_reason
  and the embedded Metrics: total_duration, load_duration, prompt_eval_count, prompt_eval_duration, eval_count,
  eval_duration, all durations in nanoseconds, each left out when zero: `omitempty`) and GenerateResponse
  (`response` instead of `message`); ProcessModelResponse of /api/ps (size, size_vram, context_length).
- `server/routes.go` (streamResponse): the stream is `application/x-ndjson`, one JSON object and a newline
  each; an error after the first line is one more line `{"error": "..."}`; an unknown path is gin's plain-text
  "404 page not found".
- Its runners (runner/ollamarunner/runner.go) end the prompt's time at the first token: the recorded numbers
  are the workload of tests/data/remote_metrics (ollama-chat.json: 512 prompt tokens in 0.25 s, 129 reply
  tokens whose 128 steps took 2.56 s, the model loaded in 0.1 s).

Its /v1/chat/completions answers as Ollama's OpenAI layer does, with `usage` alone: a test that got the
server's numbers got them from the native API. `last` replaces the numbers of the stream's last line (raw JSON
text, for hostile values), `hold` stops a reply after its first two lines until released (a cancel's test),
`native=False` makes /api/chat and /api/generate unknown paths (an Ollama look-alike), `ps=False` /api/ps.
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

DATA = Path(__file__).resolve().parents[1] / "data" / "remote_metrics"
MODEL = "llama3.1:8b"
CREATED = "2026-12-01T10:00:00.000000Z"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@dataclass
class FakeOllama:
    tokens: list[str] = field(default_factory=lambda: ["Hello", " there"])
    thinking: list[str] = field(default_factory=list)  # message.thinking lines before the answer's
    last: str | None = None  # the last line's Metrics as raw JSON members ('"eval_count": NaN, ...'), as sent
    hold: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    native: bool = True
    ps: bool = True
    error_after: str | None = None  # a line {"error": ...} after the first token instead of the rest
    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (path, JSON body) of each POST
    gets: list[str] = field(default_factory=list)
    hung_up: threading.Event = field(default_factory=threading.Event)


def _metrics() -> str:
    done = recorded("ollama-chat.json")
    keys = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
            "eval_duration")
    return ", ".join(f'"{k}": {json.dumps(done[k])}' for k in keys)


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer  # its state: this fake's
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self, status: int, body: bytes, content_type: str = "application/json; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_found(self) -> None:
        self._body(404, b"404 page not found", "text/plain")

    def do_GET(self) -> None:
        st = self.server.state
        st.gets.append(self.path)
        if self.path == "/api/version":
            return self._body(200, json.dumps(recorded("ollama-version.json")).encode())
        if self.path == "/api/ps" and st.ps:
            return self._body(200, json.dumps(recorded("ollama-ps.json")).encode())
        if self.path == "/v1/models":  # Ollama's OpenAI layer (openai/openai.go ListCompletion)
            return self._body(200, json.dumps({"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 1764583200, "owned_by": "library"}]}).encode())
        self._not_found()

    def do_POST(self) -> None:
        st = self.server.state
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        st.posts.append((self.path, body))
        if self.path == "/v1/chat/completions":
            return self._openai()
        if self.path not in ("/api/chat", "/api/generate") or not st.native:
            return self._not_found()
        if body.get("model") != MODEL:  # routes.go ChatHandler: a model it does not have
            return self._body(404, json.dumps({"error": f"model '{body.get('model')}' not found"}).encode())
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chat = self.path == "/api/chat"

        def line(text: str = "", thinking: str = "") -> str:
            if chat:
                message: dict[str, str] = {"role": "assistant", "content": text}
                if thinking:
                    message["thinking"] = thinking
                return json.dumps({"model": MODEL, "created_at": CREATED, "message": message, "done": False})
            part = {"model": MODEL, "created_at": CREATED, "response": text, "done": False}
            return json.dumps({**part, "thinking": thinking} if thinking else part)

        lines = [line(thinking=t) for t in st.thinking] + [line(t) for t in st.tokens]
        try:
            for i, text in enumerate(lines):
                self.wfile.write(text.encode() + b"\n")
                self.wfile.flush()
                if i == 1 and st.hold:
                    st.release.wait(60)
                if i == 0 and st.error_after:
                    self.wfile.write(json.dumps({"error": st.error_after}).encode() + b"\n")
                    return
            head = json.loads(line())
            head.update(done=True, done_reason="stop")
            last = json.dumps(head)[:-1] + ", " + (st.last if st.last is not None else _metrics()) + "}"
            self.wfile.write(last.encode() + b"\n")
        except OSError:
            st.hung_up.set()

    def _openai(self) -> None:
        """Ollama's /v1 stream: the text and, last, `usage` (openai/openai.go): none of its Metrics."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        st = self.server.state
        for text in st.tokens:
            chunk = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 512, "completion_tokens": len(st.tokens), "total_tokens": 514}}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def fake_ollama() -> Iterator[tuple[str, FakeOllama]]:
    state = FakeOllama()
    with serve_on_loopback(_Handler, state) as url:
        yield url, state
        state.release.set()  # held replies end before the server shuts down
