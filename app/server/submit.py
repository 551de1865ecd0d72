"""Handing one request to the engine, for every endpoint: the byte bound, the Hub, the engine's refusal.

What an endpoint turns its body into (a Generate) goes through `open_generate`, which answers with the
queue its events arrive on or raises the ApiError to answer: 400 for a prompt over a slot (decided here,
before the engine, when its bytes already say so) or one the engine refused, 503 while the engine is busy
or restarting. The status is thus decided before a stream starts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.engine import protocol as P
from app.engine.client import EngineError
from app.server.engine_queue import Hub, Unavailable
from app.server.openai_api import ApiError


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


async def open_generate(hub: Hub, generate: P.Generate, param: str) -> asyncio.Queue[Any]:
    """Submit `generate`; the queue of its events once the engine accepted it, else the ApiError."""
    check_size(hub, generate, param)
    try:
        _accepted, queue = await hub.open(generate)
    except Unavailable as exc:
        raise ApiError(503, str(exc), type_="server_error", code="unavailable") from None
    except TimeoutError:
        raise ApiError(503, "The engine did not answer in time.", type_="server_error") from None
    except EngineError as exc:
        raise refused(exc, param) from None
    return queue
