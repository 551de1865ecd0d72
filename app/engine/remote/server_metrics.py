"""A remote server's own metrics over HTTP: which engine it is, and its /metrics (or Ollama's /api/ps) read
into ServerMeasures (app.core.remote), off the chat's path.

Every read is bounded three ways: a byte cap (MAX_METRICS_BYTES), a per-read timeout and a deadline for the
whole request (a server that drips one byte a second cannot hold a poll for longer than `timeout`). Each
request has its own connection, so a stalled /metrics never holds the chat's stream; the callers run `poll`
on a thread (the CLI) or as background work (the window), never on the thread that reads the reply. Any
failure is one line (`MetricsUnavailable`), and the chat goes on without the server's numbers.

Detection, unless the engine is given: /metrics, then TensorRT-LLM's /prometheus/metrics, read for the
engines' prefixes (vllm:, sglang:, trtllm_, llamacpp:); then Ollama's /api/version; then llama-server's
/props (a llama-server started without --metrics: named, but with nothing to read).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2

from app.core.remote.engines import ENGINES, LABELS, LLAMA, OLLAMA, SPECS, engine_from_answer, engine_from_names
from app.core.remote.exposition import MAX_METRICS_BYTES, Exposition, ExpositionError, read_exposition
from app.core.remote.llama_slots import slots_kv
from app.core.remote.measures import ServerMeasures
from app.core.remote.ollama import ps_measures
from app.core.remote.watch import ServerWatch
from app.engine.remote.backend import RemoteClient
from app.engine.remote.http import NETWORK_ERRORS, explain, new_client

DEFAULT_TIMEOUT_S = 3.0
MAX_JSON_BYTES = 1 << 20


class MetricsUnavailable(Exception):
    """The server's own metrics cannot be read (one line saying why)."""


class MetricsSource:
    """One server's metrics. `engine` forces the engine (one of app.core.remote.engines.ENGINES)."""

    def __init__(self, client: RemoteClient, engine: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 max_bytes: int = MAX_METRICS_BYTES) -> None:
        if engine is not None and engine not in ENGINES:
            raise MetricsUnavailable(f"unknown engine {engine!r} (one of: {', '.join(ENGINES)})")
        self.client = client
        self.engine = engine
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._http = new_client(timeout)
        self.watch: ServerWatch | None = None
        self.model = client.model
        self._pending: Exposition | None = None  # the scrape detect() read, for the first poll

    # ------------------------------------------------------------------ HTTP
    def _get(self, path: str, limit: int) -> tuple[int, bytes]:
        url, headers = self.client.url_for(path)
        headers = {**headers, "Accept": "text/plain, application/json"}
        deadline = time.monotonic() + self.timeout
        where = f"{self.client.host}:{self.client.port}{path}"
        try:
            with self._http.stream("GET", url, headers=headers) as resp:
                status = resp.status_code
                chunks, size = [], 0
                for chunk in resp.iter_raw():
                    size += len(chunk)
                    if size > limit:
                        raise MetricsUnavailable(f"{where} sent more than {limit:,} bytes: not read")
                    if time.monotonic() > deadline:
                        raise MetricsUnavailable(f"{where} took over {self.timeout:.0f} s to answer: given up")
                    chunks.append(chunk)
        except NETWORK_ERRORS as exc:
            why = explain(exc, where, self.client.host, self.timeout, "its metrics request")
            raise MetricsUnavailable(why) from None
        return status, b"".join(chunks)

    def _exposition(self, path: str) -> Exposition | None:
        status, body = self._get(path, self.max_bytes)
        if status != 200:
            return None
        try:
            return read_exposition(body.decode("utf-8", "replace"), time.monotonic())
        except ExpositionError as exc:
            raise MetricsUnavailable(f"{self.client.host}:{self.client.port}{path}: {exc}") from None

    def _json(self, path: str) -> Any:
        status, body = self._get(path, MAX_JSON_BYTES)
        if status != 200:
            return None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            return None

    # ------------------------------------------------------------------ detection and polling
    def detect(self) -> str:
        """The engine's key, from what the server serves; the first scrape is kept for the first poll."""
        if self.engine is not None:
            return self.engine
        for path in ("/metrics", "/prometheus/metrics"):
            scrape = self._exposition(path)
            engine = engine_from_names(scrape.names()) if scrape is not None else None
            if engine is not None and scrape is not None:
                self.engine = engine
                self._pending = scrape
                return engine
        for path in ("/api/version", "/props"):
            engine = engine_from_answer(path, self._json(path))
            if engine is not None:
                self.engine = engine
                return engine
        raise MetricsUnavailable(f"{self.client.host}:{self.client.port} serves no metrics Roofline reads "
                                 "(no /metrics of vLLM, SGLang, TensorRT-LLM or llama-server, not Ollama): "
                                 "only the client's wall clock")

    def _start(self, engine: str) -> ServerWatch:
        if self.watch is None or self.watch.spec.key != engine:
            self.watch = ServerWatch(SPECS[engine])
        return self.watch

    def poll(self) -> ServerMeasures:
        """The server's measures now, over the last minute of this source's polls."""
        engine = self.detect()
        if engine == OLLAMA:
            m = ps_measures(self._json("/api/ps"), time.monotonic(), self.model)
            if m is None:
                raise MetricsUnavailable("Ollama's /api/ps lists no loaded model")
            return m
        watch = self._start(engine)
        scrape, self._pending = self._pending or self._exposition(SPECS[engine].metrics_path), None
        if scrape is None:
            hint = " (started without --metrics?)" if engine == LLAMA else ""
            raise MetricsUnavailable(f"{LABELS[engine]} at {self.client.host}:{self.client.port} has no "
                                     f"{SPECS[engine].metrics_path}{hint}")
        m = watch.add(scrape)
        if engine == LLAMA and m.kv_fraction is None:  # llama-server: KV use from /slots, where it serves them
            try:
                kv = slots_kv(self._json("/slots"))
            except MetricsUnavailable:
                kv = None  # the KV card says "not reported"; the rest of the poll stands
            if kv is not None:
                m.kv_tokens, m.kv_capacity = kv
                m.kv_fraction = kv[0] / kv[1]
        return m

    def close(self) -> None:
        try:
            self._http.close()
        except httpx2.HTTPError:
            pass
