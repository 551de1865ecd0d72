"""A remote backend: any OpenAI-compatible server (llama.cpp server, llama-cpp-python, vLLM, LM Studio ...).

`RemoteClient` mirrors `EngineClient` where it makes sense (context manager, start/close, send, generate,
new_request_id, on_event on a thread) so the CLI and the GUI drive either one. It streams
`/v1/chat/completions` (messages) or `/v1/completions` (raw prompt) with `stream=true` over httpx2 (reads
bounded: app.engine.remote.http; one reply at most MAX_REPLY_BYTES of text, its numbers checked in
app.engine.remote.openai_stream). TTFT and ITL are the client's wall clock (network included); prefill and
decode come from the server's llama-server `timings` when it sends them (app.engine.remote.server_timings), else
from chunk arrival times. An Ollama server (its GET /api/version, asked once at connect, or `engine="ollama"`)
streams through its native /api/chat and /api/generate instead, whose last line has its own prefill and decode
(app.engine.remote.ollama_native); one without them gets /v1 again. The server's chat template is never seen:
see `source` in the metrics and Loaded.

Security default: plain http only to loopback hosts; anything else needs https, or an explicit opt-in
(`allow_insecure_http=True` or ROOFLINE_ALLOW_INSECURE_HTTP=1), which warns. API keys come from the caller
or the OS keyring (app.core.config.secrets), never from settings files.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx2

from app.core.config.network import is_loopback
from app.core.files.untrusted import TooLarge
from app.core.remote.engines import OLLAMA
from app.engine import protocol as P
from app.engine.client import EngineError
from app.engine.reasoning_stream import ReasoningStream
from app.engine.remote.http import (
    NDJSON,
    NETWORK_ERRORS,
    SSE,
    Connection,
    event_data,
    explain,
    is_timeout,
    json_lines,
    new_client,
    not_a_stream,
    read_body,
    status_error,
)
from app.engine.remote.ollama_native import answers_as_ollama, native_metrics, native_request, parse_line
from app.engine.remote.openai_stream import (  # noqa: F401 (SOURCE and the limits are part of this module's API)
    LLAMA_EXTRAS,
    MAX_ERROR_BYTES,
    MAX_EVENT_BYTES,
    MAX_JSON_BYTES,
    MAX_REPLY_BYTES,
    MAX_REPLY_CHUNKS,
    SOURCE,
    ReplySize,
    client_metrics,
    listed_models,
    model_facts,
    parse_data,
    remote_loaded,
    request_body,
)
from app.engine.remote.server_timings import reply_metrics


def _err(kind: str, message: str, request_id: str | None = None) -> EngineError:
    return EngineError(P.Error(request_id, kind, message))


class RemoteClient:
    """One OpenAI-compatible server. Blocking helpers without `on_event`; events on a thread with it."""

    def __init__(self, url: str, api_key: str | None = None, model: str | None = None,
                 on_event: Callable[[Any], None] | None = None, timeout: float = 30.0,
                 allow_insecure_http: bool | None = None, send_llama_extras: bool = True,
                 engine: str | None = None) -> None:
        self.url = url.strip()
        self.model = model
        self.engine = engine  # the serving engine (app.core.remote.engines): None until connect() asks
        self.timeout = timeout
        self._api_key = api_key
        self._on_event = on_event
        self._extras = send_llama_extras
        if allow_insecure_http is None:
            allow_insecure_http = os.environ.get("ROOFLINE_ALLOW_INSECURE_HTTP") == "1"
        self._allow_http = allow_insecure_http
        parts = urlsplit(self.url if "://" in self.url else f"http://{self.url}")
        self._bad_url: str | None = None  # reported by start(), inside the caller's error handling
        try:
            port = parts.port
        except ValueError:
            port, self._bad_url = None, f"Bad port in {url!r}"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self._bad_url = f"Not a server URL: {url!r} (expected http(s)://host[:port])"
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = port or (443 if parts.scheme == "https" else 80)
        prefix = parts.path.rstrip("/")
        prefix = prefix.removesuffix("/v1")
        self._prefix = prefix
        self.loaded: P.Loaded | None = None
        self._counter = 0
        self._lock = threading.Lock()
        self._cancelled: set[str] = set()
        self._active: dict[str, Connection] = {}
        self._client: httpx2.Client | None = None
        self._started = False
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ lifetime
    def start(self) -> None:
        if self._bad_url:
            raise _err("bad_request", self._bad_url)
        if self.scheme == "http" and not is_loopback(self.host):
            if not self._allow_http:
                raise _err("bad_request", f"Refusing plain http to {self.host}: the prompt, the reply and the "
                           "API key would cross the network unencrypted. Use https, or opt in explicitly "
                           "(ROOFLINE_ALLOW_INSECURE_HTTP=1 / the 'allow insecure http' setting).")
            warning = f"warning: plain http to {self.host}: traffic and API key are not encrypted"
            self.warnings.append(warning)
            print(warning, file=sys.stderr)
        if self._api_key is None:
            from app.core.config.secrets import load_api_key

            self._api_key = load_api_key(self.url)
        self._started = True

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            active = list(self._active.items())
            self._cancelled.update(rid for rid, _ in active)
        for _, conn in active:
            conn.abort()
        # The httpx2 client stays: it keeps no idle connection (see remote_http.new_client), and closing it
        # under a stream that another thread still reads would fail that read in another way than the abort.
        self._started = False

    def __enter__(self) -> RemoteClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._started

    def new_request_id(self, prefix: str = "r") -> str:
        self._counter += 1
        return f"{prefix}remote-{os.getpid()}-{self._counter}-{time.monotonic_ns() % 1_000_000}"

    # ------------------------------------------------------------------ HTTP
    def _http(self) -> httpx2.Client:
        with self._lock:
            if self._client is None:
                self._client = new_client(self.timeout)
            return self._client

    def _url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self._prefix}{path}"

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "User-Agent": "roofline"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    def _where(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self._prefix}"

    def url_for(self, path: str) -> tuple[str, dict[str, str]]:
        """The URL and headers of `path` on this server: the metrics poller's, beside the chat's."""
        return self._url(path), self._headers()

    def _explain(self, exc: BaseException, what: str) -> str:
        return explain(exc, self._where(), self.host, self.timeout, what)

    def _status_error(self, status: int, body: bytes, request_id: str | None = None) -> EngineError:
        return status_error(status, body, self._where(), request_id)

    def _get_json(self, path: str) -> Any:
        try:
            with self._http().stream("GET", self._url(path), headers=self._headers()) as resp:
                status = resp.status_code
                body = read_body(resp, MAX_JSON_BYTES if status == 200 else MAX_ERROR_BYTES,
                                 f"the answer of {self._where()}{path}")
        except TooLarge as exc:
            raise _err("protocol", f"{exc} (a broken or hostile server?)") from None
        except NETWORK_ERRORS as exc:
            raise _err("load_failed", self._explain(exc, "the model list request")) from exc
        if status != 200:
            raise self._status_error(status, body)
        try:
            return json.loads(body)
        except ValueError as exc:
            raise _err("protocol", f"{self._where()}{path} did not return JSON") from exc

    # ------------------------------------------------------------------ connect ("load")
    def connect(self) -> P.Loaded:
        """Ask the server which models it serves; returns a Loaded-like description of the remote model."""
        if not self._started:
            self.start()
        t0 = time.perf_counter()
        models = listed_models(self._get_json("/v1/models"))
        ids = [str(m["id"]) for m in models if m.get("id")]
        if self.model is None:
            if not ids:
                raise _err("load_failed", f"{self._where()} lists no models; pass a model name")
            self.model = ids[0]
        if self.engine is None:  # Ollama's replies carry its numbers only on its native API
            url, headers = self.url_for("/api/version")
            self.engine = OLLAMA if answers_as_ollama(url, headers) else ""
        facts, notes = model_facts(models, self.model)
        for note in notes:
            self.warnings.append(note)
            print(note, file=sys.stderr)
        self.loaded = remote_loaded(self._where(), self.host, self.model, ids, facts, (time.perf_counter() - t0) * 1e3)
        if self._on_event is not None:
            self._on_event(self.loaded)
        return self.loaded

    def load(self, config: P.LoadConfig, timeout: float = 300.0) -> P.Loaded:
        """A remote server loads its own models: there is nothing to send a LoadConfig to."""
        raise _err("bad_request", "A remote server loads its own models; use connect() instead of load().")

    # ------------------------------------------------------------------ generation
    def _open_stream(self, req: P.Generate) -> tuple[httpx2.Response, bool]:
        """The answer to the request (and whether it is Ollama's native stream), once the server took it."""
        rid = req.request_id
        client = self._http()
        while True:  # each retry below turns something off for good: it ends
            native = self.engine == OLLAMA
            path, body = native_request(req, self.model) if native else request_body(req, self.model, self._extras)
            conn = Connection()
            with self._lock:
                self._active[rid] = conn
            request = client.build_request("POST", self._url(path), content=json.dumps(body).encode(),
                                           headers=self._headers(), extensions={"trace": conn.trace})
            try:
                resp = client.send(request, stream=True)
            except NETWORK_ERRORS as exc:
                if rid in self._cancelled:
                    raise _Cancelled() from exc
                raise _err("timeout" if is_timeout(exc) else "generation_failed",
                           self._explain(exc, "the request"), rid) from exc
            if resp.status_code == 200:
                return resp, native
            try:
                err_body = read_body(resp, MAX_ERROR_BYTES, "the error body")
            except (TooLarge, *NETWORK_ERRORS):
                err_body = b"(an error body too long or broken to show)"
            finally:
                resp.close()
            if native and resp.status_code in (404, 405) and b'"error"' not in err_body:  # no native API here
                self.engine = ""
                continue
            # Strict OpenAI-style servers reject llama.cpp's sampling fields: retry once without them.
            if not native and self._extras and resp.status_code in (400, 422) and any(
                    k.encode() in err_body for k in (*LLAMA_EXTRAS, "ignore_eos", "stream_options")):
                self._extras = False
                continue
            raise self._status_error(resp.status_code, err_body, rid)

    def _stream(self, req: P.Generate) -> Iterator[Any]:
        """Token events, then Done; raises EngineError on failures (with what arrived so far)."""
        if not self._started:
            self.start()
        if self.loaded is None:
            self.connect()
        rid = req.request_id
        t_request = time.monotonic()
        ttft_ms = 0.0
        times: list[float] = []
        # Thinking arrives as `reasoning_content` (llama-server --reasoning-format, vLLM, DeepSeek's API;
        # `reasoning` on some) or inline as <think>…</think> in content; either way it is kept apart.
        reply = ReasoningStream(rid, t_request, split=req.messages is not None and req.split_reasoning)
        usage: dict[str, Any] = {}
        timings: dict[str, Any] | None = None  # llama-server's (or roofline serve's) own phase numbers, as sent
        last: dict[str, Any] | None = None  # Ollama's native last line, with its numbers
        native = False
        size = ReplySize(self._where())  # at most MAX_REPLY_CHUNKS pieces and MAX_REPLY_BYTES of text
        finish = "length"
        resp: httpx2.Response | None = None
        try:
            try:
                resp, native = self._open_stream(req)
            except _Cancelled:
                finish = "cancelled"
            problem = not_a_stream(resp, NDJSON if native else SSE) if resp is not None else None
            if problem:
                raise _err("generation_failed", f"The server at {self._where()} {problem}.", rid)
            events = (json_lines if native else event_data)(resp, MAX_EVENT_BYTES) if resp is not None else iter(())
            while resp is not None:
                if rid in self._cancelled:
                    finish = "cancelled"
                    break
                try:
                    payload = next(events, None)
                except TooLarge:
                    raise _err("generation_failed", size.too_much(), rid) from None
                except (*NETWORK_ERRORS, ValueError) as exc:
                    if rid in self._cancelled:
                        finish = "cancelled"
                        break
                    kind = "timeout" if is_timeout(exc) else "generation_failed"
                    raise _err(kind, self._explain(exc, f"mid-reply (after {len(times)} tokens)"), rid) from exc
                if payload is None:
                    if rid in self._cancelled:
                        finish = "cancelled"
                        break
                    raise _err("generation_failed", f"The server at {self._where()} closed the connection "
                               f"mid-reply after {len(times)} tokens (it stopped or crashed).", rid)
                chunk = parse_line(payload) if native else parse_data(payload)
                if chunk is None:
                    continue
                timings = chunk.timings if chunk.timings is not None else timings
                if chunk.done:
                    break
                if chunk.error is not None:
                    raise _err("generation_failed", f"The server reported: {chunk.error}", rid)
                usage = chunk.usage if chunk.usage is not None else usage
                for text, thought in zip(chunk.texts, chunk.reasoning, strict=False):
                    if (stop := size.over(text, thought)) is not None:  # the reply ends before this piece
                        raise _err("generation_failed", stop, rid)
                    now = time.monotonic()
                    if not times:
                        ttft_ms = (now - t_request) * 1000.0
                    times.append(now)
                    event = reply.emit(text, now, len(times), reasoning=thought)
                    if event is not None:
                        yield event
                finish = chunk.finish or finish
                if chunk.last is not None:  # the native stream's last line
                    last = chunk.last
                    break
        finally:
            with self._lock:
                self._active.pop(rid, None)
                self._cancelled.discard(rid)
            if resp is not None:
                resp.close()
        tail = reply.finish(time.monotonic())
        if tail is not None:
            yield tail
        client = client_metrics(t_request, time.monotonic(), ttft_ms, times, usage, req.messages is not None)
        data = native_metrics(client, last, reply.metrics()) if native else reply_metrics(client, timings,
                                                                                            reply.metrics())
        yield P.Done(rid, reply.answer, finish, data, reasoning=reply.reasoning)

    def generate(self, request: P.Generate, timeout: float = 600.0) -> Iterator[Any]:
        """Blocking: yield Token events, then Done. Raises EngineError on an error."""
        return self._stream(request)

    def send(self, command: Any) -> None:
        """Generate runs on a thread and delivers to on_event; Cancel stops a stream; others are no-ops."""
        if isinstance(command, P.Generate):
            threading.Thread(target=self._run_async, args=(command,), name="remote-stream", daemon=True).start()
        elif isinstance(command, P.Cancel):
            with self._lock:
                self._cancelled.add(command.request_id)
                conn = self._active.get(command.request_id)
            if conn is not None:
                conn.abort()  # unblocks a read waiting on the server
        elif isinstance(command, P.Shutdown):
            self.close()
        elif isinstance(command, P.Load):
            self._deliver(P.Error(None, "bad_request", "A remote server loads its own models; use connect()."))

    def _deliver(self, event: Any) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _run_async(self, req: P.Generate) -> None:
        try:
            for event in self._stream(req):
                self._deliver(event)
        except EngineError as exc:
            self._deliver(exc.error)
        except Exception as exc:  # noqa: BLE001 - a thread must report, never die silently
            self._deliver(P.Error(req.request_id, "generation_failed", f"{type(exc).__name__}: {exc}"))

    def collect(self, request: P.Generate) -> P.Done:
        """Run a request to the end and return its Done (sweeps)."""
        done = [event for event in self.generate(request) if isinstance(event, P.Done)]
        assert done
        return done[-1]


class _Cancelled(Exception):
    pass
