"""`POST /infill`: fill-in-the-middle for editors, in llama-server's shape (what llama.vim and llama.vscode send).

Body: `input_prefix` and `input_suffix` (the code before and after the cursor, both required),
`input_extra` (other files' chunks, `{"filename", "text"}`), `prompt` (text typed after the prefix), and the
sampling fields of /v1/completions (`n_predict` or `max_tokens` for the reply's length). The engine lays the
prompt out with the model's FIM tokens (app.engine.batch.infill); a model without them is a 400 naming the
tokens it lacks. The answer is llama-server's native one: `content`, `stop`, `stop_type` (eos, word,
limit), `stopping_word`, `tokens_predicted`, `tokens_evaluated`, `tokens_cached` and `timings`; streamed, one
`data: {"content": piece, "stop": false}` event per token and a last one with `stop: true` and the rest
(no [DONE]: llama-server's native streams have none).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.core.sampling import defaults as D
from app.engine import protocol as P
from app.engine.batch.infill import Infill
from app.server import openai_api as api
from app.server import submit
from app.server.engine_queue import Hub

STOP_TYPES = {"length": "limit", "context_full": "limit"}


def _string(body: dict[str, Any], name: str, required: bool) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise api.ApiError(400, f"'{name}' must be a string{' (it is required)' if required else ''}.", param=name)
    return value


def _extra(body: dict[str, Any]) -> list[dict[str, str]]:
    raw = body.get("input_extra")
    if raw is None:
        return []
    ok = isinstance(raw, list) and all(isinstance(c, dict) and isinstance(c.get("text"), str)
                                       and isinstance(c.get("filename", ""), str) for c in raw)
    if not ok:
        raise api.ApiError(400, "'input_extra' must be a list of {\"filename\": string, \"text\": string}.",
                           param="input_extra")
    return [{"filename": str(c.get("filename", "tmp")), "text": str(c["text"])} for c in raw]


def parse(body: dict[str, Any], request_id: str, model_names: tuple[str, ...], client_key: str = "") -> Infill:
    api.check_params(body, "infill")
    api.check_model(body, model_names)
    n_predict = api.integer(body, "n_predict", None, -1, api.UNLIMITED_TOKENS)
    max_tokens = api.integer(body, "max_tokens", None, 1, api.UNLIMITED_TOKENS)
    limit = max_tokens if n_predict is None or n_predict < 0 else n_predict
    if limit == 0:
        raise api.ApiError(400, "'n_predict' must be -1 (no limit) or at least 1.", param="n_predict")
    sampling = P.Sampling(
        temperature=api.number(body, "temperature", D.TEMPERATURE, 0.0, 2.0),
        top_p=api.number(body, "top_p", D.TOP_P, 0.0, 1.0),
        top_k=int(api.integer(body, "top_k", D.TOP_K, 0, 1 << 20) or 0),
        min_p=api.number(body, "min_p", D.MIN_P, 0.0, 1.0),
        repeat_penalty=api.number(body, "repeat_penalty", 1.0, 0.0, 10.0),
        max_tokens=limit or api.UNLIMITED_TOKENS,
        seed=api.integer(body, "seed", None, -(1 << 63), (1 << 63) - 1),
        stop=api.stops(body), ignore_eos=api.boolean(body, "ignore_eos"),
        frequency_penalty=api.number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        presence_penalty=api.number(body, "presence_penalty", 0.0, -2.0, 2.0))
    if sampling.seed is not None:
        sampling.seed %= 1 << 63
    salt = body.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or len(salt) > api.MAX_SALT_CHARS):
        raise api.ApiError(400, f"'cache_salt' must be a string of at most {api.MAX_SALT_CHARS} characters.",
                           param="cache_salt")
    return Infill(request_id=request_id, prompt=_string(body, "prompt", False), sampling=sampling,
                  cache_salt=api.key_salt(client_key, salt or ""), split_reasoning=False,
                  input_prefix=_string(body, "input_prefix", True), input_suffix=_string(body, "input_suffix", True),
                  input_extra=_extra(body))


def final_body(done: P.Done, model: str) -> dict[str, Any]:
    m = done.metrics
    word = str(m.get("stopping_word") or "")
    stop_type = STOP_TYPES.get(done.finish_reason) or ("word" if word else "eos")
    return {"content": done.text, "stop": True, "model": model, "stop_type": stop_type, "stopping_word": word,
            "tokens_predicted": int(m.get("completion_tokens", 0)), "tokens_evaluated": int(m.get("prompt_tokens", 0)),
            "tokens_cached": int(m.get("cache_n", 0)), "truncated": False, "timings": api.timings(m)}


async def handle(request: Request, hub: Hub, model_id: str, model_names: tuple[str, ...], body: dict[str, Any],
                 client_key: str) -> Response:
    """POST /infill, its body read and the caller authorized; errors OpenAI-shaped as on /v1."""
    try:
        infill = parse(body, hub.new_request_id(), model_names, client_key)
        stream = api.boolean(body, "stream")
        _accepted, queue = await submit.open_generate(hub, infill, "input_prefix")
    except api.ApiError as exc:
        return JSONResponse(exc.body(), status_code=exc.status)
    if stream:
        return StreamingResponse(_events(hub, infill.request_id, model_id, queue), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    try:
        done = await submit.wait_done(request, hub, infill.request_id, queue)
    except api.ApiError as exc:
        return JSONResponse(exc.body(), status_code=exc.status)
    if done is None:
        return Response(status_code=499)
    return JSONResponse(final_body(done, model_id))


async def _events(hub: Hub, rid: str, model: str, queue: asyncio.Queue[Any]) -> AsyncIterator[bytes]:
    finished = False
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), submit.KEEPALIVE_S)
            except TimeoutError:
                yield b": waiting\n\n"
                continue
            if isinstance(item, P.Token):
                yield api.sse({"content": item.text, "stop": False})
            elif isinstance(item, P.Done):
                finished = True
                yield api.sse({**final_body(item, model), "content": ""})
                return
            elif isinstance(item, P.Error):
                finished = True
                yield api.sse(api.ApiError(500, item.message, type_="server_error").body())
                return
    finally:
        hub.release(rid, finished)
