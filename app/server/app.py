"""The HTTP application (Starlette): OpenAI-compatible endpoints, /health and /metrics.

Requests are validated in app.server.openai_api, submitted through the Hub, and answered in one JSON body
or as server-sent events. The HTTP status is decided before the first byte: a stream starts only after the
engine has accepted the prompt, so a prompt over the context is a 400, not an error inside a 200 stream.
A client that goes away mid-stream has its request cancelled in the engine (its KV cells are freed).
A prompt longer (in bytes) than a slot could hold is refused here, before it reaches the engine; the
whole application sits behind app.server.guards (Host and Origin allowlists).

The handlers are module functions; what one server serves (its Hub, model name and API key) is a `Served`
on the application's state, so `build_app` only puts routes, handlers and that state together.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from app.engine import protocol as P
from app.server import anthropic_api, embeddings, infill_api, submit, tools_api
from app.server import openai_api as api
from app.server.engine_queue import Hub
from app.server.guards import Guard, allowed_hosts

MAX_BODY_BYTES = 32 * 2**20  # far above any prompt a context holds; a bigger body is refused unread
KEEPALIVE_S = submit.KEEPALIVE_S  # an SSE comment this often while a request waits: a client gone is noticed
BODY_SLACK_BYTES = 2**20  # a body's JSON besides its prompt text (fields, the messages' own braces)
BODY_TIMEOUT_S = 60.0  # a body still arriving after this is refused (408): a trickle cannot hold a slot


def body_limit(hub: Hub) -> int:
    """The largest body a prompt that fits a slot can come in: its bytes JSON-escaped at worst (6 for 1),
    plus room for the other fields and the messages' own JSON. MAX_BODY_BYTES until the engine said."""
    cap = hub.stats.max_prompt_bytes if hub.stats else 0
    return min(MAX_BODY_BYTES, 6 * cap + BODY_SLACK_BYTES) if cap else MAX_BODY_BYTES


async def _read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused (413) past MAX_BODY_BYTES before it is all in memory. Past `limit` it is read to
    its end but not kept: nothing that long can fit a slot, and neither joining nor parsing it (a few tenths
    of a second for 32 MB, on the event loop every stream's tokens go through) is worth it."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise api.ApiError(413, f"The request body is over {MAX_BODY_BYTES // 2**20} MiB.")
    parts, size = [], 0
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            async for part in request.stream():
                size += len(part)
                if size > MAX_BODY_BYTES:
                    raise api.ApiError(413, f"The request body is over {MAX_BODY_BYTES // 2**20} MiB.")
                if size <= limit:
                    parts.append(part)
    except TimeoutError:
        raise api.ApiError(408, f"The request body did not arrive within {BODY_TIMEOUT_S:.0f} s.") from None
    if size > limit:
        raise api.ApiError(413, f"The request body is {size} bytes: more than any prompt one request may use "
                                f"can take (at most {limit} bytes here). Shorten the prompt, or start the server "
                                "with a larger --ctx.", code="context_length_exceeded")
    return b"".join(parts)


def _error(exc: api.ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


@dataclass(frozen=True)
class Served:
    """What the handlers need, kept on the application (`request.app.state.served`)."""

    hub: Hub
    model_id: str
    api_key: str | None
    created: int  # when the server started: the model's `created` in /v1/models
    strict_model_names: bool = False  # True: a request naming another model is a 400 (model_not_found)

    @property
    def model_names(self) -> tuple[str, ...]:
        """The names requests may give: the model's id, and any other unless names are strict."""
        return (self.model_id,) if self.strict_model_names else (self.model_id, api.ANY_MODEL)


def _served(request: Request) -> Served:
    served: Served = request.app.state.served
    return served


def _presented_key(request: Request) -> str:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else request.headers.get("x-api-key", "")


def _authorized(request: Request) -> bool:
    api_key = _served(request).api_key
    if not api_key:
        return True
    return hmac.compare_digest(_presented_key(request).encode(), api_key.encode())


def _unauthorized() -> JSONResponse:
    return _error(api.ApiError(401, "Invalid or missing API key: send 'Authorization: Bearer <key>'.",
                               type_="authentication_error", code="invalid_api_key"))


def _model_object(served: Served) -> dict[str, Any]:
    hub = served.hub
    loaded = hub.loaded
    meta: dict[str, Any] = {}
    if loaded is not None:
        meta = {"n_ctx": loaded.n_ctx, "n_ctx_train": loaded.n_ctx_train, "n_params": loaded.n_params,
                "size": loaded.model_size, "n_vocab": loaded.n_vocab, "parallel": hub.parallel}
    return {"id": served.model_id, "object": "model", "created": served.created, "owned_by": "roofline",
            "meta": meta}


async def models(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    return JSONResponse({"object": "list", "data": [_model_object(_served(request))]})


async def model_by_id(request: Request) -> Response:
    """The model under its own id, or under any other name unless names are strict (then 404)."""
    if not _authorized(request):
        return _unauthorized()
    served = _served(request)
    name = request.path_params["model"]
    if name not in served.model_names and api.ANY_MODEL not in served.model_names:
        return _error(api.ApiError(404, f"The model {name!r} does not exist here; this server has "
                                        f"{served.model_id!r}.", param="model", code="model_not_found"))
    return JSONResponse(_model_object(served))


async def health(request: Request) -> Response:
    """No key needed (as llama-server), so nothing here names a path or echoes an engine's error."""
    hub = _served(request).hub
    if not hub.ready:
        state = "engine restart failed, retrying" if hub.restart_error else "engine restarting"
        return JSONResponse({"status": "unavailable", "error": state}, status_code=503)
    stats = hub.stats
    return JSONResponse({"status": "ok", "slots_idle": hub.parallel - (stats.running if stats else 0),
                         "slots_processing": stats.running if stats else 0})


async def metrics(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    return PlainTextResponse(_served(request).hub.metrics.render(), media_type="text/plain; version=0.0.4")


async def chat_completions(request: Request) -> Response:
    return await _complete(request, chat=True)


async def completions(request: Request) -> Response:
    return await _complete(request, chat=False)


async def _complete(request: Request, chat: bool) -> Response:
    if not _authorized(request):
        return _unauthorized()
    served = _served(request)
    hub = served.hub
    try:
        body = api.parse_json(await _read_body(request, body_limit(hub)))
        key = _presented_key(request) if served.api_key else ""
        parsed = api.parse_request(body, chat, hub.new_request_id(), served.model_names, client_key=key)
        tools_api.apply(body, parsed, hub.loaded.tool_format if hub.loaded else "")
        _accepted, queue = await submit.open_generate(hub, parsed.generate, "messages" if chat else "prompt")
    except api.ApiError as exc:
        return _error(exc)
    cid = api.new_id(chat)
    if parsed.stream:
        return StreamingResponse(_stream(served, parsed, cid, queue), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return await _collect(request, served, parsed, cid, queue)


async def _collect(request: Request, served: Served, parsed: api.ParsedRequest, cid: str,
                   queue: asyncio.Queue[Any]) -> Response:
    try:
        done = await submit.wait_done(request, served.hub, parsed.generate.request_id, queue)
    except api.ApiError as exc:
        return _error(exc)
    if done is None:
        return Response(status_code=499)
    reply = api.completion_body(parsed, cid, served.model_id, done.text, done.finish_reason, done.metrics)
    if parsed.tool_plan is not None:
        tools_api.rewrite_body(parsed.tool_plan, reply, done.text)
    return JSONResponse(reply)


async def _stream(served: Served, parsed: api.ParsedRequest, cid: str,
                  queue: asyncio.Queue[Any]) -> AsyncIterator[bytes]:
    rid = parsed.generate.request_id
    model_id = served.model_id
    created_at = int(time.time())
    finished = False
    try:
        if parsed.chat:
            yield api.sse(api.chunk_body(parsed, cid, model_id, created_at, "", role=True))
        elif parsed.output.echo and parsed.generate.prompt:
            yield api.sse(api.chunk_body(parsed, cid, model_id, created_at, parsed.generate.prompt))
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield b": waiting\n\n"
                continue
            if isinstance(event, P.Token):
                text = event.text if parsed.tool_plan is None else parsed.tool_plan.feed(event.text)
                yield api.sse(api.chunk_body(parsed, cid, model_id, created_at, text, logprobs=event.logprobs))
            elif isinstance(event, P.Done):
                finished = True
                for chunk in _tool_chunks(parsed, cid, model_id, created_at, event):
                    yield chunk
                for chunk in _last_chunks(parsed, cid, model_id, created_at, event):
                    yield chunk
                return
            elif isinstance(event, P.Error):
                finished = True
                yield api.sse(api.ApiError(500, event.message, type_="server_error").body())
                yield api.sse("[DONE]")
                return
    finally:
        served.hub.release(rid, finished)


def _tool_chunks(parsed: api.ParsedRequest, cid: str, model_id: str, created_at: int, event: P.Done) -> list[bytes]:
    """A tool request's held-back content and its calls, before the last chunk (whose finish reason is then
    "tool_calls")."""
    plan = parsed.tool_plan
    if plan is None:
        return []
    content, calls = plan.finish()
    chunks = [api.sse(api.chunk_body(parsed, cid, model_id, created_at, content))] if content else []
    if calls:
        delta = api.chunk_body(parsed, cid, model_id, created_at, None)
        delta["choices"][0]["delta"] = tools_api.call_deltas(calls)
        chunks.append(api.sse(delta))
        event.finish_reason = "tool_calls"
    return chunks


def _last_chunks(parsed: api.ParsedRequest, cid: str, model_id: str, created_at: int,
                 event: P.Done) -> list[bytes]:
    """A finished stream's last events: the finish reason with the timings, the usage if asked for, [DONE]."""
    last = api.chunk_body(parsed, cid, model_id, created_at, None if parsed.chat else "", finish=event.finish_reason)
    last["timings"] = api.timings(event.metrics)
    chunks = [api.sse(last)]
    if parsed.include_usage:
        usage = api.chunk_body(parsed, cid, model_id, created_at, None)
        usage["choices"] = []
        usage["usage"] = api.usage(event.metrics)
        chunks.append(api.sse(usage))
    chunks.append(api.sse("[DONE]"))
    return chunks


async def messages(request: Request) -> Response:
    """Anthropic's Messages API (app.server.anthropic_api), its errors in Anthropic's shape."""
    if not _authorized(request):
        return anthropic_api.error_response(api.ApiError(401, "Invalid or missing API key: send 'x-api-key'."))
    served = _served(request)
    try:
        body = api.parse_json(await _read_body(request, body_limit(served.hub)))
    except api.ApiError as exc:
        return anthropic_api.error_response(exc)
    key = _presented_key(request) if served.api_key else ""
    return await anthropic_api.handle(request, served.hub, served.model_id, served.model_names, body, key)


async def embed(request: Request) -> Response:
    """POST /v1/embeddings (app.server.embeddings)."""
    if not _authorized(request):
        return _unauthorized()
    served = _served(request)
    try:
        body = api.parse_json(await _read_body(request, body_limit(served.hub)))
        return JSONResponse(await embeddings.embed(served.hub, served.model_id, served.model_names, body))
    except api.ApiError as exc:
        return _error(exc)


async def infill(request: Request) -> Response:
    """POST /infill (app.server.infill_api)."""
    if not _authorized(request):
        return _unauthorized()
    served = _served(request)
    try:
        body = api.parse_json(await _read_body(request, body_limit(served.hub)))
    except api.ApiError as exc:
        return _error(exc)
    key = _presented_key(request) if served.api_key else ""
    return await infill_api.handle(request, served.hub, served.model_id, served.model_names, body, key)


async def not_found(request: Request, exc: Exception) -> Response:
    return _error(api.ApiError(404, f"No route {request.method} {request.url.path}.", code="not_found"))


async def bad_method(request: Request, exc: Exception) -> Response:
    return _error(api.ApiError(405, f"{request.method} is not allowed on {request.url.path}."))


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    app.state.served.hub.attach(asyncio.get_running_loop())
    yield


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/models", models, methods=["GET"]),
    Route("/v1/models/{model:path}", model_by_id, methods=["GET"]),
    Route("/models/{model:path}", model_by_id, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
    Route("/completions", completions, methods=["POST"]),
    Route("/v1/messages", messages, methods=["POST"]),
    Route("/v1/embeddings", embed, methods=["POST"]),
    Route("/embeddings", embed, methods=["POST"]),
    Route("/infill", infill, methods=["POST"]),
    Route("/health", health, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]


def build_app(hub: Hub, model_id: str, api_key: str | None = None, hosts: frozenset[str] | None = None,
              origins: tuple[str, ...] = (), strict_model_names: bool = False) -> Starlette:
    """The application serving `hub`'s model as `model_id` (behind `api_key` when there is one), to the
    Host names `hosts` (default: loopback's) and, from browsers, to `origins` only. Requests may name any
    model unless `strict_model_names`."""
    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers={404: not_found, 405: bad_method},
                    middleware=[Middleware(Guard, hosts=hosts or allowed_hosts("127.0.0.1"), origins=origins)])
    app.state.served = Served(hub, model_id, api_key, created=int(time.time()),
                              strict_model_names=strict_model_names)
    return app
