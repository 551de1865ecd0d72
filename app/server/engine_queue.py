"""Between the asyncio server and the engine process: one queue of events per request, engine restarts.

The engine's reader thread hands every event to the event loop (`call_soon_threadsafe`); the loop routes
it to the request's queue. If the engine dies, every request in flight gets the error, and a new engine is
started and loaded on a worker thread; until it is back, new requests are refused with 503. A restart
that fails (the model file gone, say) is tried again every RESTART_RETRY_S, so the server comes back by
itself once the file does; what went wrong is printed on stderr, never sent to a client (it holds paths).

The engine's inbox is bounded: a request counts against `parallel + max_queue` from the moment it is
sent until the engine has answered its end (Done or Error), not only while its HTTP side waits. A client
that gives up has its request cancelled in the engine, and its place is free once the engine says so.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from app.engine import protocol as P
from app.engine.batch.client import BatchEngineClient
from app.engine.batch.messages import Accepted, BatchStats, Embed, Embeddings
from app.engine.client import EngineError
from app.server.metrics import ServerMetrics

ACCEPT_TIMEOUT_S = 60.0  # a Generate is answered (Accepted or Error) as soon as it is tokenized
RESTART_RETRY_S = 5.0  # a failed engine restart is tried again this often
RESTART_FAILED = "The engine could not be restarted; it is tried again every few seconds (see the server's log)."


class Unavailable(Exception):
    """The engine cannot take requests now (restarting, or the queue is full): HTTP 503."""


class Hub:
    def __init__(self, config: P.LoadConfig, parallel: int, max_queue: int,
                 client_factory: Callable[[int], BatchEngineClient] = BatchEngineClient) -> None:
        self.config = config
        self.parallel = parallel
        self.max_queue = max_queue
        self.metrics = ServerMetrics()
        self.stats: BatchStats | None = None
        self.loaded: P.Loaded | None = None
        self.ready = False
        self.restart_error: str | None = None
        self._factory = client_factory
        self._client: BatchEngineClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queues: dict[str, asyncio.Queue[Any]] = {}
        self._in_engine: set[str] = set()  # sent to the engine and not ended there (Done or Error) yet
        self._closed = threading.Event()
        self.restart_retry_s = RESTART_RETRY_S
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ engine lifetime
    def start(self) -> P.Loaded:
        """Start and load the engine (blocking). Raises EngineError when the model cannot be loaded."""
        client = self._factory(self.parallel)
        self.loaded = client.start_loaded(self.config, self._on_engine_event)
        self._client = client
        self.ready = True
        return self.loaded

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def close(self) -> None:
        self.ready = False
        self._closed.set()
        if self._client is not None:
            self._client.close()

    @property
    def engine_pid(self) -> int | None:
        return self._client.pid if self._client else None

    def _on_engine_event(self, event: Any) -> None:  # the engine's reader thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._route, event)
            except RuntimeError:  # the loop closed in between (server shutting down)
                pass

    def _route(self, event: Any) -> None:  # the event loop
        if isinstance(event, BatchStats):
            self.stats = event
            self.metrics.on_stats(event.running, event.waiting, event.kv_tokens, event.n_ctx, event.steps)
            return
        rid = getattr(event, "request_id", None)
        if isinstance(event, P.Error) and event.fatal:
            self._engine_died(event)
            return
        if isinstance(event, P.Done):  # counted even when its client has gone (a cancelled request)
            self.metrics.on_done(event.finish_reason, event.metrics)
            self._in_engine.discard(rid or "")
        elif isinstance(event, P.Error) and rid:
            self.metrics.requests_failed += 1
            self._in_engine.discard(rid)
        elif isinstance(event, Embeddings):
            self._in_engine.discard(event.request_id)
        queue = self._queues.get(rid) if rid else None
        if queue is not None:
            queue.put_nowait(event)

    def _engine_died(self, error: P.Error) -> None:
        self.ready = False
        self.metrics.engine_restarts += 1
        self.metrics.on_stats(0, 0, 0, self.metrics.n_ctx, self.metrics.decode_steps)
        for rid, queue in list(self._queues.items()):
            queue.put_nowait(P.Error(rid, "engine_died", error.message, fatal=True))
            self.metrics.requests_failed += 1
        self._in_engine.clear()
        threading.Thread(target=self._restart, name="engine-restart", daemon=True).start()

    def _restart(self) -> None:
        with self._lock:
            old = self._client
            if old is not None:
                old.close(timeout=2.0)
            while not self._closed.is_set():
                try:
                    self.start()
                    self.restart_error = None
                    print("roofline serve: the engine is back", file=sys.stderr, flush=True)
                    return
                except (EngineError, OSError) as exc:
                    if self.restart_error is None:
                        print(f"roofline serve: the engine could not be restarted: {exc}", file=sys.stderr,
                              flush=True)
                    self.restart_error = RESTART_FAILED
                self._closed.wait(self.restart_retry_s)

    # ------------------------------------------------------------------ requests
    def new_request_id(self) -> str:
        return f"s{os.getpid()}-{next(self._ids)}"

    @property
    def in_flight(self) -> int:
        """Requests the engine holds (tokenizing, waiting, running, or cancelled and not yet ended there)."""
        return len(self._in_engine | self._queues.keys())

    def _admit(self, rid: str) -> tuple[BatchEngineClient, asyncio.Queue[Any]]:
        """A place for request `rid`: the engine to send it to and the queue its events arrive on. Unavailable
        (503) while the engine restarts or every running and waiting place is taken."""
        if not self.ready or self._client is None:
            raise Unavailable(self.restart_error or "The engine is restarting; try again in a moment.")
        if self.in_flight >= self.parallel + self.max_queue:
            raise Unavailable(f"The server is busy: {self.parallel} requests running and {self.max_queue} "
                              "waiting. Try again later.")
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queues[rid] = queue
        self._in_engine.add(rid)
        return self._client, queue

    async def open(self, request: P.Generate) -> tuple[Accepted, asyncio.Queue[Any]]:
        """Submit `request`; returns once the engine accepted it, with the queue its events arrive on.

        Raises Unavailable (503), or EngineError with the engine's Error (kind bad_request: 400)."""
        rid = request.request_id
        client, queue = self._admit(rid)
        try:
            client.send(request)
            deadline = time.monotonic() + ACCEPT_TIMEOUT_S
            while True:
                event = await asyncio.wait_for(queue.get(), max(0.01, deadline - time.monotonic()))
                if isinstance(event, Accepted):
                    return event, queue
                if isinstance(event, P.Error):
                    raise EngineError(event)
        except BaseException as exc:
            self._queues.pop(rid, None)
            if isinstance(exc, EngineError):  # the engine ended it (its Error), or never got it
                self._in_engine.discard(rid)
            if not isinstance(exc, EngineError):  # timed out, or the client left while it waited
                self.release(rid, finished=False)
            raise

    async def embed(self, command: Embed) -> Embeddings:
        """The engine's Embeddings for `command`; raises as `open` does. A client that leaves while it waits
        has it cancelled; its place counts until the engine has answered, as a generation's does."""
        rid = command.request_id
        client, queue = self._admit(rid)
        finished = False
        try:
            client.send(command)
            while True:
                event = await queue.get()
                if isinstance(event, Embeddings):
                    finished = True
                    return event
                if isinstance(event, P.Error):
                    finished = True
                    raise EngineError(event)
        except EngineError:  # the engine ended it (its Error), or never got it
            self._in_engine.discard(rid)
            raise
        finally:
            self.release(rid, finished)

    def release(self, request_id: str, finished: bool) -> None:
        """The HTTP side is done with a request: cancel it in the engine unless it finished there."""
        self._queues.pop(request_id, None)
        if not finished and self._client is not None and self.ready:
            try:
                self._client.send(P.Cancel(request_id))
            except EngineError:
                pass

    def kill_engine(self) -> None:
        """Tests: SIGKILL the engine process."""
        if self._client is not None:
            self._client.kill()
