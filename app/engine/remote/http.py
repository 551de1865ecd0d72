"""The remote backend's HTTP on httpx2, every read bounded: a body up to a size, a stream as server-sent
events through httpx2's own `EventSource` (each event at most a size), a socket another thread can shut.

Why httpx2 and its EventSource, not httpx + httpx-sse (measured 2026-11-30): huggingface_hub 2.x runs on
httpx2, so it is in the app anyway and the one HTTP client library for hub, downloads, remote headers and
this backend. httpx-sse 0.4.3 imports `httpx` (the 0.28 line, which it does not even declare): here
`import httpx_sse` fails with "No module named 'httpx'", and installing it would add a second client stack
(httpx + httpcore 1.x) beside httpx2 just to split lines. Its line decoder also holds an unterminated line
without bound (64.1 MiB held after 64 MiB without a newline), the very thing a hostile server sends.
httpx2's EventSource is derived from httpx-sse and bounds each event, the unfinished line included
(`max_event_size`). sseclient-py 1.9.0, the other maintained parser, took 152 s and 128 MiB for 64 MiB
without a blank line and raises on invalid UTF-8.

As the standard library's http.client did here before: one connection per request, no proxies or netrc
from the environment, no redirects, bodies uncompressed (a compressed stream is refused: decompressing is
where a small body becomes a large one). Ollama's native API streams JSON lines instead of events: read by
`json_lines`, each line bounded alike.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import httpx2

from app.core.files.untrusted import TooLarge
from app.engine import protocol as P
from app.engine.client import EngineError

NETWORK_ERRORS = (httpx2.HTTPError, OSError)


def new_client(timeout: float) -> httpx2.Client:
    """A client whose connect, read and write each time out after `timeout` seconds."""
    return httpx2.Client(
        timeout=httpx2.Timeout(timeout), follow_redirects=False, trust_env=False,
        verify=ssl.create_default_context(), headers={"Accept-Encoding": "identity"},
        limits=httpx2.Limits(max_keepalive_connections=0),  # a new connection per request: see Connection
    )


class Connection:
    """The socket of one request, captured as it connects (httpx2's trace hook), so that a cancel from
    another thread can shut it and so end a read that waits on the server, before or after its headers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._aborted = False

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._sock = sock if isinstance(sock, socket.socket) else self._sock
            aborted = self._aborted
        if aborted:
            self.abort()

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def read_body(resp: httpx2.Response, limit: int, what: str) -> bytes:
    """Up to `limit` bytes of the body as sent; `TooLarge` (naming `what`) when it holds more."""
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"{what} is larger than {limit:,} bytes: stopped reading")
    return b"".join(chunks)


SSE, NDJSON = "text/event-stream", "application/x-ndjson"  # the two streams read here (NDJSON: Ollama's native API)


def not_a_stream(resp: httpx2.Response, kind: str = SSE) -> str | None:
    """Why a 200 answer is not the stream we read (`kind`: SSE or NDJSON), or None when it is one."""
    content_type = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type != kind:
        what = "server-sent events" if kind == SSE else "JSON lines"
        return f"answered with content type {content_type or 'none'!r}, not a stream of {what}"
    encoding = resp.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return f"compressed the stream ({encoding!r}) though asked not to"
    return None


def event_data(resp: httpx2.Response, max_event_bytes: int) -> Iterator[str]:
    """The `data` of each server-sent event, in order (events without data are skipped). Raises
    `TooLarge` for an event over `max_event_bytes`, network errors as httpx2 raises them."""
    try:
        for event in httpx2.EventSource(resp, max_event_size=max_event_bytes):
            if event.data:
                yield event.data
    except httpx2.SSEError as exc:
        raise TooLarge(str(exc)) from exc


def json_lines(resp: httpx2.Response, max_line_bytes: int) -> Iterator[str]:
    """Each non-blank line of a newline-delimited JSON stream, as it arrives (Ollama's native API). Raises
    `TooLarge` for a line over `max_line_bytes`, the unfinished one included, network errors as httpx2 does."""
    pieces: list[bytes] = []  # the unfinished line, kept in pieces: joining it once per chunk would be quadratic
    size = 0
    for chunk in resp.iter_raw():
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if size + end - start > max_line_bytes:
                raise TooLarge(f"a line of the stream is over {max_line_bytes:,} bytes")
            line = b"".join([*pieces, chunk[start:end]])
            pieces, size, start = [], 0, end + 1
            if line.strip():
                yield line.decode("utf-8", "replace")
        if start < len(chunk):
            pieces.append(chunk[start:])
            size += len(chunk) - start
            if size > max_line_bytes:
                raise TooLarge(f"a line of the stream is over {max_line_bytes:,} bytes")
    line = b"".join(pieces)
    if line.strip():
        yield line.decode("utf-8", "replace")


def status_error(status: int, body: bytes, where: str, request_id: str | None = None) -> EngineError:
    """A server's answer other than 200, in words: its `error` (OpenAI's and Ollama's place for it) or body."""
    text = body.decode("utf-8", "replace")[:400]
    try:
        detail = json.loads(text).get("error", text)
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
    except (ValueError, AttributeError):
        detail = text
    if status in (401, 403):
        kind, message = "load_failed", f"The server refused the API key (HTTP {status}): {detail}"
    elif status == 404 and detail == text:  # no error of its own: most likely not the API's base URL
        kind, message = "load_failed", (f"{where} has no OpenAI-compatible API here (HTTP 404). "
                                        "Give the server's base URL, e.g. http://127.0.0.1:8080")
    elif status == 404:  # its own words ("model 'x' not found")
        kind, message = "load_failed", f"The server answered HTTP 404: {detail}"
    else:
        kind, message = "bad_request", f"The server answered HTTP {status}: {detail}"
    return EngineError(P.Error(request_id, kind, message))


def explain(exc: BaseException, where: str, host: str, timeout: float, what: str) -> str:
    """A network failure in words, from httpx2's error or the socket error it wraps."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(isinstance(e, (httpx2.TimeoutException, socket.timeout, TimeoutError)) for e in chain):
        return (f"The server at {where} did not answer {what} within {timeout:.0f} s "
                "(it accepted the connection but sent nothing).")
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return f"Cannot reach the server at {where}: connection refused (is it running?)."
    gai = next((e for e in chain if isinstance(e, socket.gaierror)), None)
    if gai is not None:
        return f"Cannot resolve host {host!r}: {gai}."
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if tls is not None:
        return f"TLS failed with {host}: {tls}."
    return f"Connection to {where} failed {what}: {type(exc).__name__}: {exc}"


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (httpx2.TimeoutException, socket.timeout, TimeoutError))
