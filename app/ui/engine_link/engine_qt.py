"""The GUI's one handle on the engine process: `EngineClient` events re-emitted as Qt signals.

Events arrive on the client's reader thread. Tokens are parked in a deque and delivered in batches by a
QTimer (at most ~30 view updates per second however fast the model decodes, 15 where llama.cpp's threads
take every CPU: `pacing`, set when a model loads); every other event is
re-emitted through a signal, which Qt queues onto the GUI thread. Nothing here ever waits on the engine:
sending is a short pipe write, and a dead engine becomes one `error` signal (kind `engine_died`).

This object owns every engine process the window runs: the chat's, and the Lab's measuring engines
(`measuring_engine`), made by the same factory and closed by the same `shutdown`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.chat.pacing import ROOMY, Pacing, all_layers_on_gpu, view_pacing
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from app.ui.engine_link.remote_servers import RemoteConnecting, ServerAnswered

# Engine states shown in the status bar.
STOPPED, STARTING, IDLE, LOADING, GENERATING, BENCHING, DEAD = (
    "stopped", "starting", "idle", "loading", "generating", "benchmarking", "dead")

# ≤ 30 view updates per second (app.core.chat.pacing: 15 where llama.cpp's threads take every core): smooth to
# the eye, and half the repaints of 60. Every repaint on a 2-core laptop is time taken from decoding.
TOKEN_BATCH_MS = ROOMY.text_ms
# The window's engine runs at nice +5: the window gets a core first when it needs one, at no measurable cost
# to decode (event-loop p99 stall 4.6 -> 2.4 ms on 2 cores; scripts/bench_gui, docs/bench/2026-11-29-gui-streaming.md).
ENGINE_NICE = 5


def _engine_client(on_event: Callable[[Any], None] | None, nice: int = ENGINE_NICE) -> EngineClient:
    return EngineClient(on_event=on_event, nice=nice)


class EngineQt(RemoteConnecting, QObject):
    ready = Signal(object)  # P.Ready
    progress = Signal(str, float)  # stage, fraction 0..1
    loaded = Signal(object)  # P.Loaded
    tokens = Signal(str, str, list)  # request_id, text of the batch, engine timestamps `t` of its tokens
    reasoning = Signal(str, str)  # request_id, thinking text of the batch (sent before that batch's tokens)
    done = Signal(object)  # P.Done
    prefilled = Signal(object)  # P.Prefilled: a reply's prefill numbers, at its first token
    prefill_progress = Signal(object)  # P.PrefillProgress: a long prefill's chunks, before the first token
    error = Signal(object)  # P.Error
    stats = Signal(object)  # P.Stats
    bench_result = Signal(object)  # P.BenchResult
    state_changed = Signal(str)

    _event = Signal(object)  # reader thread -> GUI thread (queued: emitted from a foreign thread)

    def __init__(self, parent: QObject | None = None,
                 client_factory: Callable[..., EngineClient] = _engine_client):
        super().__init__(parent)
        self._factory = client_factory
        self._client: Any = client_factory(on_event=self._on_reader_event)
        self.remote: tuple[str, str | None, str | None] | None = None  # (url, api key, model) when remote
        self._pending: collections.deque[P.Token] = collections.deque()
        self._batch = QTimer(self)
        self._batch.setInterval(TOKEN_BATCH_MS)
        self._batch.timeout.connect(self.drain_tokens)
        self._event.connect(self._dispatch)
        self._state = STOPPED
        self._last_config: P.LoadConfig | None = None
        self._good_config: P.LoadConfig | None = None  # the last local load that succeeded
        self.restoring: P.LoadConfig | None = None  # reloading it after a failed load
        self._connecting: Any = None  # a server being connected to; the current engine stays meanwhile
        self._connecting_to: tuple[str, str | None, str | None] | None = None
        self._stats_sent_at: float | None = None
        self._active_request: str | None = None
        self.loaded_info: P.Loaded | None = None
        self.ready_info: P.Ready | None = None
        self.pacing: Pacing = ROOMY
        self._measuring: list[Any] = []  # the Lab's engines now open (see measuring_engine)
        self._measuring_lock = threading.Lock()

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> str:
        return self._state

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    @property
    def alive(self) -> bool:
        return self._client.alive

    @property
    def pid(self) -> int | None:
        return getattr(self._client, "pid", None) if self._client.alive else None

    @property
    def client(self) -> Any:
        return self._client

    # ------------------------------------------------------------------ the Lab's measuring engine
    @contextlib.contextmanager
    def measuring_engine(self) -> Iterator[EngineClient]:
        """A second engine process for a Lab sweep, started on entry and closed on exit (or by `shutdown`).

        Why a second process and not the chat's: a sweep reloads the model once per configuration (n_ubatch,
        threads, KV type are load-time settings) with a context sized for the sweep, and waits on the
        client's blocking helpers; in the chat's engine that would unload the chat's model and mix bench
        events into the chat's stream. Why owned here: one object makes (the same factory, which tests
        replace) and stops every engine process the window runs. It runs at normal priority, not the chat's
        nice level, because its timings are the measurement. Blocking: call it from a worker thread."""
        client = self._factory(on_event=None, nice=0)
        with self._measuring_lock:
            self._measuring.append(client)
        try:
            client.start()
            yield client
        finally:
            with self._measuring_lock:
                if client in self._measuring:
                    self._measuring.remove(client)
            client.close()

    @property
    def active_request(self) -> str | None:
        return self._active_request

    # ------------------------------------------------------------------ commands (never block)
    def start(self) -> None:
        if self._client.alive:
            return
        self._pending.clear()
        self._stats_sent_at = None
        self.loaded_info = None
        try:
            self._client.start()
        except OSError as exc:
            self._fail(P.Error(None, "engine_died", f"could not start the engine: {exc}", fatal=True))
            return
        self._set_state(STARTING)

    def load(self, config: P.LoadConfig) -> None:
        if self._connecting is not None:  # a model chosen while a server was being connected: that wins
            self._connecting.close(0.5)
            self._connecting = None
        self._back_to_local()
        if self._active_request is not None:  # the load supersedes the reply: its Done must not say idle
            self._finish_request()
        self._last_config = config
        self.start()
        if self._send(P.Load(config)):
            self._set_state(LOADING)

    def unload(self) -> None:
        """Eject: free the model's memory and keep the engine process (a remote server is disconnected)."""
        self.loaded_info = None
        if self.remote is not None:
            self._back_to_local()
        elif self._client.alive:
            self._send(P.Unload())
            self._set_state(IDLE)
        self.state_changed.emit(self._state)  # listeners re-read loaded_info

    def generate(self, request: P.Generate) -> None:
        if request.stream_interval_ms is None:  # tokens need not arrive more often than the view draws them
            request = dataclasses.replace(request, stream_interval_ms=self.pacing.text_ms)
        self._pending.clear()
        if self._send(request):
            self._active_request = request.request_id
            self._set_state(GENERATING)
            self._batch.start()

    def cancel(self, request_id: str | None = None) -> None:
        rid = request_id or self._active_request
        if rid and self._client.alive:
            self._send(P.Cancel(rid))

    def bench(self, request: P.Bench) -> None:
        if self._send(request):
            self._set_state(BENCHING)

    def request_stats(self) -> bool:
        """Ask for KV/RSS stats unless a request is already outstanding (no backlog while busy)."""
        now = time.monotonic()
        if self._state in (LOADING, GENERATING, BENCHING, STARTING):
            return False  # the engine answers between jobs only; asking now would just queue up
        if not self._client.alive or (self._stats_sent_at is not None and now - self._stats_sent_at < 5.0):
            return False
        if self._send(P.GetStats(), report=False):
            self._stats_sent_at = now
            return True
        return False

    def restart(self) -> None:
        """Kill whatever is left of the engine, start a fresh one and reload the last model."""
        self._batch.stop()
        self._pending.clear()
        self._active_request = None
        if self.remote is not None:
            self.connect_remote(*self.remote)
            return
        self._client.kill()
        self._set_state(STOPPED)
        self.start()
        if self._last_config is not None:
            self.load(self._last_config)

    def kill(self) -> None:
        """SIGKILL the engine (tests; the user's last resort)."""
        if hasattr(self._client, "kill"):
            self._client.kill()

    def new_request_id(self) -> str:
        return self._client.new_request_id("chat")

    def shutdown(self, timeout: float = 2.0) -> None:
        """At application exit only: ask the engines (the chat's, any measuring one) to stop, kill them
        after `timeout`."""
        self._batch.stop()
        with self._measuring_lock:
            measuring = list(self._measuring)
        for client in measuring:
            client.close(timeout)
        self._client.close(timeout)
        self._set_state(STOPPED)

    def _send(self, command: Any, report: bool = True) -> bool:
        try:
            self._client.send(command)
            return True
        except EngineError as exc:
            if report:
                # Deliver later, not from inside the caller's slot: no re-entrancy surprises.
                err = exc.error
                QTimer.singleShot(0, self, lambda: self._fail(err))
            return False

    # ------------------------------------------------------------------ events
    def _on_reader_event(self, event: Any) -> None:
        """Reader thread. Tokens are parked for the batch timer; the rest hop to the GUI thread."""
        if isinstance(event, P.Token):
            self._pending.append(event)
            return
        try:
            self._event.emit(event)
        except RuntimeError:  # the QObject is gone (app shutting down)
            pass

    def set_pacing(self, pacing: Pacing) -> None:
        self.pacing = pacing
        self._batch.setInterval(pacing.text_ms)

    def drain_tokens(self) -> None:
        """Deliver parked tokens as one batch per request (GUI thread)."""
        if not self._pending:
            return
        rid: str | None = None
        texts: list[str] = []
        thoughts: list[str] = []
        times: list[float] = []
        while self._pending:
            tok = self._pending.popleft()
            if rid is not None and tok.request_id != rid:
                self._emit_batch(rid, texts, thoughts, times)
                texts, thoughts, times = [], [], []
            rid = tok.request_id
            texts.append(tok.text)
            thoughts.append(tok.reasoning)
            times.append(tok.t)
        if rid is not None:
            self._emit_batch(rid, texts, thoughts, times)

    def _emit_batch(self, rid: str, texts: list[str], thoughts: list[str], times: list[float]) -> None:
        if any(thoughts):
            self.reasoning.emit(rid, "".join(thoughts))
        self.tokens.emit(rid, "".join(texts), times)

    def _dispatch(self, event: Any) -> None:
        if isinstance(event, P.Ready):
            self.ready_info = event
            if self._state == STARTING:
                self._set_state(IDLE)
            self.ready.emit(event)
        elif isinstance(event, P.Progress):
            self.progress.emit(event.stage, float(event.fraction))
        elif isinstance(event, ServerAnswered):
            if event.client is not self._connecting:
                return  # a connection given up meanwhile (a local model chosen, another server): not in use
            self._take_remote()
            self._dispatch(event.loaded)
        elif isinstance(event, P.Loaded):
            if event.chat_template_source != "server":
                self._good_config = self._last_config
            self.restoring = None
            self.loaded_info = event
            local = event.chat_template_source != "server"  # a remote server decodes on its own machine
            on_gpu = all_layers_on_gpu(event.n_gpu_layers, event.metadata)
            self.set_pacing(view_pacing(event.n_threads if local else None, os.cpu_count(), on_gpu))
            self._set_state(IDLE)
            self.loaded.emit(event)
        elif isinstance(event, P.Done):
            self.drain_tokens()  # every token of this request precedes its Done
            if event.request_id == self._active_request:
                self._finish_request()
            self.done.emit(event)
        elif isinstance(event, P.Prefilled):
            self.prefilled.emit(event)
        elif isinstance(event, P.PrefillProgress):
            self.prefill_progress.emit(event)
        elif isinstance(event, P.Stats):
            self._stats_sent_at = None
            self.stats.emit(event)
        elif isinstance(event, P.BenchResult):
            self._set_state(IDLE)
            self.bench_result.emit(event)
        elif isinstance(event, P.Error):
            self.drain_tokens()
            self._fail(event)

    def _finish_request(self) -> None:
        self._active_request = None
        self._batch.stop()
        if self._state != LOADING:  # a load sent meanwhile is still running: stay "loading"
            self._set_state(IDLE)

    def _fail(self, error: P.Error) -> None:
        if error.fatal:
            self._batch.stop()
            self._active_request = None
            self._stats_sent_at = None
            self.loaded_info = None
            self._set_state(DEAD)
        elif error.request_id is not None and error.request_id == self._active_request:
            self._finish_request()
        elif self._state in (LOADING, BENCHING):
            self._set_state(IDLE)
            if error.kind == "load_failed":
                self.loaded_info = None  # the engine let the old model go before trying the new one
                self._restore_previous()
        self.error.emit(error)

    def _restore_previous(self) -> None:
        """A failed load keeps the previous model in use: the engine freed it to make room, so it is loaded
        again (once: if that fails too, nothing is retried)."""
        good = self._good_config
        if good is None or good == self._last_config or self.restoring is not None:
            self.restoring = None
            return
        self.restoring = good
        self._last_config = good
        if self._send(P.Load(good)):
            self._set_state(LOADING)
