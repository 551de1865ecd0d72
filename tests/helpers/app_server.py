"""The server's HTTP layer without a model: `roofline serve`'s application and connection limits on uvicorn
in a thread, over a stand-in Hub whose engine never runs (what a test needs it to answer, it sets):
`StubHub` refuses every request (503), `ScriptedHub` answers each with a scripted reply, token by token."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from app.engine import protocol as P
from app.engine.batch.messages import Accepted, Embed, Embeddings
from app.engine.client import EngineError
from app.server.app import build_app
from app.server.connections import guarded_h11
from app.server.engine_queue import Unavailable
from app.server.metrics import ServerMetrics


@dataclass
class StubHub:
    """What the handlers read of a Hub; `open` refuses (503) and records what reached it."""

    ready: bool = True
    restart_error: str | None = None
    parallel: int = 2
    stats: Any = None
    loaded: Any = None
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    opened: list[P.Generate] = field(default_factory=list)

    def new_request_id(self) -> str:
        return f"stub-{len(self.opened)}"

    async def open(self, request: P.Generate) -> Any:
        self.opened.append(request)
        raise Unavailable("stub: no engine")

    def release(self, request_id: str, finished: bool) -> None:
        pass

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        pass


@dataclass
class ScriptedHub(StubHub):
    """Answers every request with `reply` in `pieces` tokens (cut by a stop string, as the engine does),
    ending with `finish`; the metrics say `prompt_tokens` prompt tokens. An Embed gets one vector per input
    (its length, its index, 1, normalized: 3 numbers) and a token per byte. With `refuse`, the engine
    refuses every request with that message (a bad_request Error: a 400)."""

    reply: str = "Hello there, friend."
    pieces: int = 4
    finish: str = "stop"
    prompt_tokens: int = 12
    refuse: str | None = None
    embedded: list[Embed] = field(default_factory=list)

    async def embed(self, command: Embed) -> Embeddings:
        self.embedded.append(command)
        if self.refuse:
            raise EngineError(P.Error(command.request_id, "bad_request", self.refuse))
        vectors = []
        for i, item in enumerate(command.inputs):
            v = [float(len(item)), float(i), 1.0]
            norm = sum(x * x for x in v) ** 0.5
            vectors.append([x / norm for x in v])
        return Embeddings(command.request_id, vectors, sum(len(str(x).encode()) for x in command.inputs))

    async def open(self, request: P.Generate) -> Any:
        self.opened.append(request)
        rid = request.request_id
        if self.refuse:
            raise EngineError(P.Error(rid, "bad_request", self.refuse))
        text, finish, word = self.reply, self.finish, ""
        for stop in request.sampling.stop:
            if stop in text:
                text, finish, word = text[:text.index(stop)], "stop", stop
        step = max(1, -(-len(text) // self.pieces))
        parts = [text[i:i + step] for i in range(0, len(text), step)]
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for i, part in enumerate(parts):
            queue.put_nowait(P.Token(rid, part, i, float(i)))
        metrics = {"prompt_tokens": self.prompt_tokens, "completion_tokens": len(parts), "cache_n": 0,
                   "prompt_n": self.prompt_tokens, "predicted_n": len(parts), "stopping_word": word}
        queue.put_nowait(P.Done(rid, text, finish, metrics))
        return Accepted(rid, self.prompt_tokens), queue


@dataclass
class AppServer:
    port: int
    hub: StubHub

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body, headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


@contextmanager
def app_server(hub: StubHub | None = None, max_connections: int = 128, header_timeout_s: float = 10.0,
               **app_options: Any) -> Iterator[AppServer]:
    """The application on a free loopback port, stopped on exit."""
    import uvicorn

    hub = hub or StubHub()
    app = build_app(hub, "stub.gguf", **app_options)  # type: ignore[arg-type]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           http=guarded_h11(max_connections, header_timeout_s)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield AppServer(sock.getsockname()[1], hub)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
