"""The HTTP application (Starlette): OpenAI-compatible endpoints, /health and /metrics.

Requests are validated in app.server.openai_api, submitted through the Hub, and answered in one JSON body
or as server-sent events. The HTTP status is decided before the first byte: a stream starts only after the
engine has accepted the prompt, so a prompt over the context is a 400, not an error inside a 200 stream.
A client that goes away mid-stream has its request cancelled in the engine (its KV cells are freed).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from app.engine import protocol as P
from app.engine.client import EngineError
from app.server import openai_api as api
from app.server.engine_queue import Hub, Unavailable

MAX_BODY_BYTES = 32 * 2**20  # far above any prompt a context holds; a bigger body is refused unread
KEEPALIVE_S = 5.0  # an SSE comment this often while a request waits: a client that left is noticed


async def _read_body(request: Request) -> bytes:
    """The body, refused (413) past MAX_BODY_BYTES before it is all in memory."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise api.ApiError(413, f"The request body is over {MAX_BODY_BYTES // 2**20} MiB.")
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > MAX_BODY_BYTES:
            raise api.ApiError(413, f"The request body is over {MAX_BODY_BYTES // 2**20} MiB.")
        parts.append(part)
    return b"".join(parts)


def _error(exc: api.ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def build_app(hub: Hub, model_id: str, api_key: str | None = None) -> Starlette:
    model_names = (model_id,)
    created = int(time.time())

    def authorized(request: Request) -> bool:
        if not api_key:
            return True
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else request.headers.get("x-api-key", "")
        return hmac.compare_digest(token.encode(), api_key.encode())

    def unauthorized() -> JSONResponse:
        return _error(api.ApiError(401, "Invalid or missing API key: send 'Authorization: Bearer <key>'.",
                                   type_="authentication_error", code="invalid_api_key"))

    async def models(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        loaded = hub.loaded
        meta: dict[str, Any] = {}
        if loaded is not None:
            meta = {"n_ctx": loaded.n_ctx, "n_ctx_train": loaded.n_ctx_train, "n_params": loaded.n_params,
                    "size": loaded.model_size, "n_vocab": loaded.n_vocab, "parallel": hub.parallel}
        return JSONResponse({"object": "list", "data": [
            {"id": model_id, "object": "model", "created": created, "owned_by": "roofline", "meta": meta}]})

    async def health(request: Request) -> Response:
        if not hub.ready:
            return JSONResponse({"status": "unavailable", "error": hub.restart_error or "engine restarting"},
                                status_code=503)
        stats = hub.stats
        return JSONResponse({"status": "ok", "slots_idle": hub.parallel - (stats.running if stats else 0),
                             "slots_processing": stats.running if stats else 0})

    async def metrics(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        return PlainTextResponse(hub.metrics.render(), media_type="text/plain; version=0.0.4")

    async def chat_completions(request: Request) -> Response:
        return await _complete(request, chat=True)

    async def completions(request: Request) -> Response:
        return await _complete(request, chat=False)

    async def _complete(request: Request, chat: bool) -> Response:
        if not authorized(request):
            return unauthorized()
        try:
            body = api.parse_json(await _read_body(request))
            parsed = api.parse_request(body, chat, hub.new_request_id(), model_names)
        except api.ApiError as exc:
            return _error(exc)
        try:
            _accepted, queue = await hub.open(parsed.generate)
        except Unavailable as exc:
            return _error(api.ApiError(503, str(exc), type_="server_error", code="unavailable"))
        except TimeoutError:
            return _error(api.ApiError(503, "The engine did not answer in time.", type_="server_error"))
        except EngineError as exc:
            if exc.error.kind == "bad_request":
                return _error(api.ApiError(400, exc.error.message, param="messages" if chat else "prompt",
                                           code="context_length_exceeded"
                                           if "context" in exc.error.message else None))
            return _error(api.ApiError(500, exc.error.message, type_="server_error"))
        cid = api.new_id(chat)
        if parsed.stream:
            return StreamingResponse(_stream(parsed, cid, queue), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return await _collect(request, parsed, cid, queue)

    async def _collect(request: Request, parsed: api.ParsedRequest, cid: str,
                       queue: asyncio.Queue[Any]) -> Response:
        rid = parsed.generate.request_id
        finished = False
        try:
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    if await request.is_disconnected():
                        return Response(status_code=499)
                    continue
                if isinstance(event, P.Done):
                    finished = True
                    return JSONResponse(api.completion_body(parsed, cid, model_id, event.text,
                                                            event.finish_reason, event.metrics))
                if isinstance(event, P.Error):
                    finished = True
                    return _error(api.ApiError(500, event.message, type_="server_error"))
        finally:
            hub.release(rid, finished)

    async def _stream(parsed: api.ParsedRequest, cid: str, queue: asyncio.Queue[Any]) -> AsyncIterator[bytes]:
        rid = parsed.generate.request_id
        created_at = int(time.time())
        finished = False
        try:
            if parsed.chat:
                yield api.sse(api.chunk_body(parsed, cid, model_id, created_at, "", role=True))
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield b": waiting\n\n"
                    continue
                if isinstance(event, P.Token):
                    yield api.sse(api.chunk_body(parsed, cid, model_id, created_at, event.text))
                elif isinstance(event, P.Done):
                    finished = True
                    last = api.chunk_body(parsed, cid, model_id, created_at, None if parsed.chat else "",
                                          finish=event.finish_reason)
                    last["timings"] = api.timings(event.metrics)
                    yield api.sse(last)
                    if parsed.include_usage:
                        usage = api.chunk_body(parsed, cid, model_id, created_at, None)
                        usage["choices"] = []
                        usage["usage"] = api.usage(event.metrics)
                        yield api.sse(usage)
                    yield api.sse("[DONE]")
                    return
                elif isinstance(event, P.Error):
                    finished = True
                    yield api.sse(api.ApiError(500, event.message, type_="server_error").body())
                    yield api.sse("[DONE]")
                    return
        finally:
            hub.release(rid, finished)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(api.ApiError(404, f"No route {request.method} {request.url.path}.", code="not_found"))

    async def bad_method(request: Request, exc: Exception) -> Response:
        return _error(api.ApiError(405, f"{request.method} is not allowed on {request.url.path}."))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        hub.attach(asyncio.get_running_loop())
        yield

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/completions", completions, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: bad_method})
