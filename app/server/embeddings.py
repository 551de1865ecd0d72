"""`POST /v1/embeddings`, OpenAI's shape: one L2-normalized vector per input, as floats or base64.

`input` is a string, a list of strings, a list of token ids or a list of such lists (at most MAX_INPUTS);
`encoding_format` "float" (the default) or "base64" (little-endian float32, what the `openai` client asks
for unless told otherwise). The engine embeds with the model's own pooling (app.engine.llama.batch.
embedding): a model whose GGUF declares none (a generation model) is a 400 that says so.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from app.engine.batch.messages import Embed, Embeddings
from app.engine.client import EngineError
from app.server import openai_api as api
from app.server.engine_queue import Hub, Unavailable

MAX_INPUTS = 2048  # OpenAI's limit per request
FORMATS = ("float", "base64")


def _is_tokens(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


def parse_inputs(raw: Any, max_bytes: int) -> list[str | list[int]]:
    if isinstance(raw, str) or (_is_tokens(raw) and raw):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(x, str) or _is_tokens(x) for x in raw):
        raise api.ApiError(400, "'input' must be a string, a list of strings, a list of token ids or a list of "
                                "token-id lists (not empty).", param="input")
    if len(raw) > MAX_INPUTS:
        raise api.ApiError(400, f"'input' has {len(raw)} items; at most {MAX_INPUTS} per request.", param="input")
    for i, item in enumerate(raw):
        if not item:
            raise api.ApiError(400, f"input[{i}] is empty.", param="input")
        size = len(item.encode("utf-8")) if isinstance(item, str) else 0
        if max_bytes and size > max_bytes:
            raise api.ApiError(400, f"input[{i}] is {size} bytes, more than one request can hold. Shorten it, or "
                                    "start the server with a larger --ctx.", param="input",
                               code="context_length_exceeded")
    return list(raw)


def parse(body: dict[str, Any], request_id: str, model_names: tuple[str, ...], max_bytes: int) -> tuple[Embed, str]:
    """The engine's Embed and the encoding format asked for (400s as ApiError)."""
    api.check_params(body, "embeddings")
    api.check_model(body, model_names)
    fmt = body.get("encoding_format") or "float"
    if fmt not in FORMATS:
        raise api.ApiError(400, "'encoding_format' must be 'float' or 'base64'.", param="encoding_format")
    return Embed(request_id, parse_inputs(body.get("input"), max_bytes)), str(fmt)


def encode(vector: list[float], fmt: str) -> list[float] | str:
    if fmt == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector


def response_body(result: Embeddings, model: str, fmt: str) -> dict[str, Any]:
    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": encode(v, fmt)}
                     for i, v in enumerate(result.vectors)],
            "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens}}


async def embed(hub: Hub, model_id: str, model_names: tuple[str, ...], body: dict[str, Any]) -> dict[str, Any]:
    """The response body for a /v1/embeddings request, or the ApiError to answer."""
    command, fmt = parse(body, hub.new_request_id(), model_names,
                         hub.stats.max_prompt_bytes if hub.stats else 0)
    try:
        result = await hub.embed(command)
    except Unavailable as exc:
        raise api.ApiError(503, str(exc), type_="server_error", code="unavailable") from None
    except EngineError as exc:
        if exc.error.kind == "bad_request":
            raise api.ApiError(400, exc.error.message, param="input" if "input[" in exc.error.message
                               else "model", code="model_not_supported" if "cannot embed" in exc.error.message
                               or "reranker" in exc.error.message else None) from None
        raise api.ApiError(500, exc.error.message, type_="server_error") from None
    return response_body(result, model_id, fmt)

