"""Handing one request to the engine, for every endpoint: the byte bound, the Hub, the engine's refusal.

What an endpoint turns its body into (a Generate) goes through `open_generate`, which answers with the
queue its events arrive on or raises the ApiError to answer: 400 for a prompt over a slot (decided here,
before the engine, when its bytes already say so) or one the engine refused, 503 while the engine is busy
or restarting. The status is thus decided before a stream starts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request

from app.engine import protocol as P
from app.engine.batch.messages import Accepted
from app.engine.client import EngineError
from app.server.engine_queue import Hub, Unavailable
from app.server.openai_api import ApiError

KEEPALIVE_S = 5.0  # how often a request that waits looks whether its client is still there


def check_size(hub: Hub, generate: P.Generate, param: str) -> None:
    """A prompt with more bytes than a slot's tokens could spell is a 400 at once: it is never sent to the
    engine, let alone tokenized (the engine checks again)."""
    stats = hub.stats
    cap = stats.max_prompt_bytes if stats else 0
    size = generate.prompt_bytes()
    if cap and stats and size > cap:
        raise ApiError(400, f"The prompt is {size} bytes, more than one request can hold: it may use at most "
                            f"{stats.n_ctx_slot} tokens. Shorten the prompt, or start the server with a larger "
                            "--ctx.",
                       param=param, code="context_length_exceeded")


def refused(exc: EngineError, param: str) -> ApiError:
    """The engine's refusal of a request as the HTTP error: 400 for a bad request (a prompt over the
    context among them), 500 for anything else."""
    if exc.error.kind == "bad_request":
        return ApiError(400, exc.error.message, param=param,
                        code="context_length_exceeded" if "context" in exc.error.message else None)
    return ApiError(500, exc.error.message, type_="server_error")


async def open_generate(hub: Hub, generate: P.Generate, param: str) -> tuple[Accepted, asyncio.Queue[Any]]:
    """Submit `generate`; the engine's Accepted (the prompt's tokens) and the queue of its events, else the
    ApiError to answer."""
    check_size(hub, generate, param)
    try:
        accepted, queue = await hub.open(generate)
    except Unavailable as exc:
        raise ApiError(503, str(exc), type_="server_error", code="unavailable") from None
    except TimeoutError:
        raise ApiError(503, "The engine did not answer in time.", type_="server_error") from None
    except EngineError as exc:
        raise refused(exc, param) from None
    return accepted, queue


async def wait_done(request: Request, hub: Hub, request_id: str, queue: asyncio.Queue[Any]) -> P.Done | None:
    """The request's Done (its token events skipped), or None when its client went away meanwhile; an
    engine Error is raised as a 500. The request is cancelled in the engine unless it ended there."""
    finished = False
    try:
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                if await request.is_disconnected():
                    return None
                continue
            if isinstance(event, P.Done):
                finished = True
                return event
            if isinstance(event, P.Error):
                finished = True
                raise ApiError(500, event.message, type_="server_error")
    finally:
        hub.release(request_id, finished)
