"""A stand-in OpenAI-compatible server on loopback whose model "thinks": it streams a fixed reply as SSE
chunks, either with the thinking inline in `content` (`<think>…</think>`, tags cut across chunks, as a
server without a reasoning parser sends it) or as separate `reasoning_content` deltas (llama-server's
--reasoning-format, vLLM, DeepSeek's API). Serves until stopped; binds 127.0.0.1 only."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, ClassVar

THINKING = "The user wants a greeting. Keep it short."
ANSWER = "Hello! How can I help?"
# Inline: the tags arrive cut in the middle, the way token-by-token streaming cuts them.
INLINE_CHUNKS = ["<th", "ink>\nThe user wants", " a greeting. Keep it short.\n</", "think>", "\n\nHello!",
                 " How can I", " help?"]
SEPARATE_CHUNKS = [("reasoning_content", "The user wants a greeting."), ("reasoning_content", " Keep it short."),
                   ("content", "Hello!"), ("content", " How can I help?")]


class _Handler(http.server.BaseHTTPRequestHandler):
    mode: ClassVar[str] = "inline"
    timeout = 10  # a client that stops reading cannot hold a handler thread for long

    def _send_json(self, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send_json({"object": "list", "data": [{"id": "thinker-7b", "object": "model"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if self.server.mode == "inline":  # type: ignore[attr-defined]
            deltas = [{"content": c} for c in INLINE_CHUNKS]
        else:
            deltas = [{k: v} for k, v in SEPARATE_CHUNKS]
        for i, delta in enumerate(deltas):
            chunk = {"choices": [{"index": 0, "delta": delta,
                                  "finish_reason": "stop" if i == len(deltas) - 1 else None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        usage = {"prompt_tokens": 12, "completion_tokens": len(deltas)}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


class ThinkingServer:
    """`with ThinkingServer("inline") as url:` … the server stops when the block ends."""

    def __init__(self, mode: str = "inline") -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.mode = mode  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                       daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)
