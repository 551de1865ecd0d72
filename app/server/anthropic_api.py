"""Anthropic's Messages API (`POST /v1/messages`) over the same engine: what coding agents speak.

A Messages body becomes the engine's chat Generate (the top-level `system` as the first message, then the
user and assistant turns; text content only), its reply an Anthropic `message`: one text block,
`stop_reason` end_turn, max_tokens or stop_sequence (with the `stop_sequence` that matched), `usage` with
`input_tokens`, `output_tokens` and `cache_read_input_tokens`. Streamed, it is Anthropic's event sequence:
message_start, content_block_start, content_block_delta (text_delta) per token, content_block_stop,
message_delta (stop reason, output tokens), message_stop; `ping` while a request waits; an `error` event if
the engine fails mid-stream. Errors are Anthropic-shaped ({"type": "error", "error": {"type", "message"}}).
Which fields are taken is app.server.params' "messages" table; any other is a 400 naming it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.core.sampling import defaults as D
from app.engine import protocol as P
from app.server import openai_api as api
from app.server import params, submit
from app.server.engine_queue import Hub

ROLES = ("user", "assistant")
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 408: "timeout_error", 413: "request_too_large", 429: "rate_limit_error",
               503: "overloaded_error"}
STOP_REASONS = {"length": "max_tokens", "context_full": "max_tokens"}  # else end_turn or stop_sequence


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def error_response(exc: api.ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.status, exc.message), status_code=exc.status)


def _text(content: Any, where: str) -> str:
    """A string, or a list of text blocks joined; any other block type is a 400 naming it."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise api.ApiError(400, f"{where} must be a string or a list of content blocks.", param=where)
    texts = []
    for i, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind != "text" or not isinstance(block.get("text"), str):
            raise api.ApiError(400, f"{where}[{i}]: only text blocks are supported, not {kind!r} (the model "
                                    "is text only and tool use is not served on this API).", param=where)
        texts.append(block["text"])
    return "".join(texts)


def _messages(body: dict[str, Any]) -> list[dict[str, str]]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise api.ApiError(400, "'messages' must be a non-empty list.", param="messages")
    out: list[dict[str, str]] = []
    system = body.get("system")
    if system is not None:
        out.append({"role": "system", "content": _text(system, "system")})
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise api.ApiError(400, f"messages[{i}].role must be 'user' or 'assistant' (the system prompt is "
                                    "the top-level 'system').", param="messages")
        out.append({"role": str(message["role"]), "content": _text(message.get("content"), f"messages[{i}].content")})
    if out[-1]["role"] == "assistant":  # a prefill: the template would close that turn, not continue it
        raise api.ApiError(400, "The last message must be the user's: continuing a partial assistant turn "
                                "(prefill) is not supported.", param="messages")
    return out


def _stops(body: dict[str, Any]) -> list[str]:
    stops = body.get("stop_sequences")
    if stops is None:
        return []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops) or len(stops) > api.MAX_STOPS:
        raise api.ApiError(400, f"'stop_sequences' must be a list of at most {api.MAX_STOPS} strings.",
                           param="stop_sequences")
    return [s for s in stops if s]


def parse(body: dict[str, Any], request_id: str, model_names: tuple[str, ...], client_key: str = "") -> P.Generate:
    """Validate a Messages body into the engine's Generate (400s as ApiError)."""
    try:
        params.check_fields(body, "messages")
    except params.UnsupportedField as exc:
        raise api.ApiError(400, str(exc), param=exc.field) from None
    api.check_model(body, model_names)
    if "max_tokens" not in body:
        raise api.ApiError(400, "'max_tokens' is required.", param="max_tokens")
    messages = _messages(body)
    # the ranges are Anthropic's (temperature 0 to 1); the defaults llama-server's, as on the OpenAI endpoints
    sampling = P.Sampling(
        temperature=api.number(body, "temperature", D.TEMPERATURE, 0.0, 1.0),
        top_p=api.number(body, "top_p", D.TOP_P, 0.0, 1.0),
        top_k=int(api.integer(body, "top_k", D.TOP_K, 0, 1 << 20) or 0),
        min_p=D.MIN_P, repeat_penalty=1.0,
        max_tokens=int(api.integer(body, "max_tokens", None, 1, api.UNLIMITED_TOKENS) or 1),
        stop=_stops(body))
    return P.Generate(request_id=request_id, messages=messages, sampling=sampling,
                      cache_salt=api.key_salt(client_key, ""))


def stop_reason(done: P.Done) -> tuple[str, str | None]:
    word = str(done.metrics.get("stopping_word") or "")
    if done.finish_reason in STOP_REASONS:
        return STOP_REASONS[done.finish_reason], None
    return ("stop_sequence", word) if word else ("end_turn", None)


def usage(metrics: dict[str, Any], prompt_tokens: int | None = None) -> dict[str, int]:
    prompt = int(metrics.get("prompt_tokens", 0)) if prompt_tokens is None else prompt_tokens
    cached = int(metrics.get("cache_n", 0))
    return {"input_tokens": prompt - cached, "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0,
            "output_tokens": int(metrics.get("completion_tokens", 0))}


def message_body(mid: str, model: str, done: P.Done) -> dict[str, Any]:
    reason, word = stop_reason(done)
    return {"id": mid, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": done.text}], "stop_reason": reason, "stop_sequence": word,
            "usage": usage(done.metrics)}


def event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, separators=(',', ':'))}\n\n".encode()


async def handle(request: Request, hub: Hub, model_id: str, model_names: tuple[str, ...], body: dict[str, Any],
                 client_key: str) -> Response:
    """POST /v1/messages, its body read and the caller authorized."""
    try:
        generate = parse(body, hub.new_request_id(), model_names, client_key)
        stream = api.boolean(body, "stream")
        accepted, queue = await submit.open_generate(hub, generate, "messages")
    except api.ApiError as exc:
        return error_response(exc)
    mid = "msg_" + uuid.uuid4().hex[:24]
    if stream:
        return StreamingResponse(_events(hub, generate.request_id, mid, model_id, accepted.prompt_tokens, queue),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    try:
        done = await submit.wait_done(request, hub, generate.request_id, queue)
    except api.ApiError as exc:
        return error_response(exc)
    if done is None:
        return Response(status_code=499)
    return JSONResponse(message_body(mid, model_id, done))


async def _events(hub: Hub, rid: str, mid: str, model: str, prompt_tokens: int,
                  queue: asyncio.Queue[Any]) -> AsyncIterator[bytes]:
    finished = False
    try:
        start: dict[str, Any] = {"id": mid, "type": "message", "role": "assistant", "model": model,
                                 "content": [], "stop_reason": None, "stop_sequence": None,
                                 "usage": usage({}, prompt_tokens)}
        yield event("message_start", {"message": start})
        yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), submit.KEEPALIVE_S)
            except TimeoutError:
                yield event("ping", {})
                continue
            if isinstance(item, P.Token):
                if item.text:
                    yield event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                              "text": item.text}})
            elif isinstance(item, P.Done):
                finished = True
                reason, word = stop_reason(item)
                yield event("content_block_stop", {"index": 0})
                yield event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": word},
                                              "usage": usage(item.metrics)})
                yield event("message_stop", {})
                return
            elif isinstance(item, P.Error):
                finished = True
                yield event("error", {"error": error_body(500, item.message)["error"]})
                return
    finally:
        hub.release(rid, finished)

