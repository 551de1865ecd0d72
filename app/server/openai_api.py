"""OpenAI request bodies in, engine requests out; engine results in, OpenAI response JSON out.

Pure functions over dicts (no HTTP, no llama_cpp). Sampling defaults are llama-server's (temperature 0.8,
top_k 40, top_p 0.95, min_p 0.05, no repeat penalty) and, like llama-server, a request without max_tokens
runs until the end of its slot's context. The llama.cpp extras llama-server accepts (top_k, min_p,
repeat_penalty, ignore_eos) are accepted too, and OpenAI's frequency_penalty and presence_penalty.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from app.core.sampling import defaults as D
from app.core.sampling.constraint import GRAMMAR_TIMING_KEYS
from app.engine import protocol as P
from app.server import params
from app.server.output_options import OptionError, OutputOptions, parse_output_options, response_logprobs

UNLIMITED_TOKENS = 1 << 30  # the engine clips max_tokens to what the slot's context leaves
TIMING_KEYS = ("prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
               "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "cache_n")
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOPS = 16
MAX_JSON_DEPTH = 400  # arrays and objects inside each other; no OpenAI body comes near it
MAX_SALT_CHARS = 256
ANY_MODEL = "*"  # among the served names: any name is served as the loaded model (llama-server's way)


class ApiError(Exception):
    """An error answered as OpenAI does: {"error": {"message", "type", "param", "code"}} with a status."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass
class ParsedRequest:
    generate: P.Generate
    stream: bool
    include_usage: bool
    chat: bool
    output: OutputOptions = OutputOptions()  # response_format, logprobs, echo (app.server.output_options)
    tool_plan: Any = None  # app.server.tools_api.ToolPlan: the request's tools (set by tools_api.apply)


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def parse_json(raw: bytes) -> dict[str, Any]:
    too_deep = ApiError(400, f"The request body nests arrays or objects more than {MAX_JSON_DEPTH} deep.")
    try:
        body = json.loads(raw)
    except RecursionError:  # the C parser recurses once per level: deep enough, it runs out of stack
        raise too_deep from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    if json_depth(body) > MAX_JSON_DEPTH:
        raise too_deep
    return body


def _salt(body: dict[str, Any]) -> str:
    salt = body.get("cache_salt")
    if salt is None:
        return ""
    if not isinstance(salt, str) or len(salt) > MAX_SALT_CHARS:
        raise ApiError(400, f"'cache_salt' must be a string of at most {MAX_SALT_CHARS} characters.",
                       param="cache_salt")
    return salt


def _number(body: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApiError(400, f"'{name}' must be a number.", param=name)
    if not lo <= value <= hi:
        raise ApiError(400, f"'{name}' must be between {lo:g} and {hi:g}; got {value}.", param=name)
    return float(value)


def _integer(body: dict[str, Any], name: str, default: int | None, lo: int, hi: int) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'{name}' must be an integer.", param=name)
    if not lo <= value <= hi:
        raise ApiError(400, f"'{name}' must be between {lo} and {hi}; got {value}.", param=name)
    return value


def _bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be true or false.", param=name)
    return value


def _stops(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= MAX_STOPS:
        return [s for s in stop if s]
    raise ApiError(400, f"'stop' must be a string or a list of at most {MAX_STOPS} strings.", param="stop")


def check_model(body: dict[str, Any], model_names: tuple[str, ...]) -> None:
    model = body.get("model")
    if model is None or model == "":
        return  # llama-server serves its one model whatever the name; so do we when none is given
    if not isinstance(model, str) or (model not in model_names and ANY_MODEL not in model_names):
        raise ApiError(400, f"The model {model!r} does not exist here; this server has {model_names[0]!r}.",
                       param="model", code="model_not_found")


def check_params(body: dict[str, Any], endpoint: str) -> None:
    """A 400 naming the first field `endpoint` does not honour (app.server.params has the tables)."""
    try:
        params.check_fields(body, endpoint)
    except params.UnsupportedField as exc:
        raise ApiError(400, str(exc), param=exc.field, code="unsupported_parameter") from None


def _content(message: Any, index: int) -> dict[str, str]:
    if not isinstance(message, dict):
        raise ApiError(400, f"messages[{index}] must be an object.", param="messages")
    role = message.get("role")
    if role not in CHAT_ROLES:
        raise ApiError(400, f"messages[{index}].role must be one of {', '.join(CHAT_ROLES)}.", param="messages")
    content = message.get("content")
    if content is None:
        content = ""
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"messages[{index}].content: only text parts are supported.",
                               param="messages")
            texts.append(part["text"])
        content = "".join(texts)
    if not isinstance(content, str):
        raise ApiError(400, f"messages[{index}].content must be a string.", param="messages")
    return {"role": "system" if role == "developer" else str(role), "content": content}


def parse_request(body: dict[str, Any], chat: bool, request_id: str,
                  model_names: tuple[str, ...], client_key: str = "") -> ParsedRequest:
    """Validate an OpenAI (chat) completion body into the engine's Generate command.

    `client_key` (the API key the request came with) and the body's `cache_salt` make the engine's cache
    salt: a cached prefix is reused, and counted in cached_tokens, only for the same key and salt."""
    check_model(body, model_names)
    check_params(body, "chat" if chat else "completions")
    messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    if chat:
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise ApiError(400, "'messages' must be a non-empty list.", param="messages")
        messages = [_content(m, i) for i, m in enumerate(raw)]
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
            raw = raw[0]
        if not isinstance(raw, str):
            raise ApiError(400, "'prompt' must be a string (one prompt per request).", param="prompt")
        prompt = raw
    if _integer(body, "n", 1, 1, 1) != 1:
        raise ApiError(400, "'n' must be 1.", param="n")
    max_tokens = _integer(body, "max_completion_tokens", None, 1, UNLIMITED_TOKENS)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", None, 1, UNLIMITED_TOKENS)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object.", param="stream_options")
    stream = _bool(body, "stream")
    include_usage = bool(stream and options and _bool(options, "include_usage"))
    sampling = P.Sampling(
        temperature=_number(body, "temperature", D.TEMPERATURE, 0.0, 2.0),
        top_p=_number(body, "top_p", D.TOP_P, 0.0, 1.0),
        top_k=int(_integer(body, "top_k", D.TOP_K, 0, 1 << 20) or 0),
        min_p=_number(body, "min_p", D.MIN_P, 0.0, 1.0),
        repeat_penalty=_number(body, "repeat_penalty", 1.0, 0.0, 10.0),
        max_tokens=max_tokens or UNLIMITED_TOKENS,
        seed=_integer(body, "seed", None, -(1 << 63), (1 << 63) - 1),
        stop=_stops(body),
        ignore_eos=_bool(body, "ignore_eos"),
        frequency_penalty=_number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        presence_penalty=_number(body, "presence_penalty", 0.0, -2.0, 2.0),
    )
    if sampling.seed is not None:
        sampling.seed %= 1 << 63
    try:
        output = parse_output_options(body, chat)
    except OptionError as exc:
        raise ApiError(400, str(exc), param=exc.param) from None
    salt = key_salt(client_key, _salt(body))
    generate = P.Generate(request_id=request_id, messages=messages, prompt=prompt, sampling=sampling,
                          cache_salt=salt, grammar=output.grammar.to_wire() if output.grammar else None,
                          logprobs=output.logprobs)
    return ParsedRequest(generate, stream, include_usage, chat, output)


def key_salt(client_key: str, salt: str) -> str:
    """The engine's cache salt for a request with this API key and cache_salt ("" when neither is set)."""
    return hashlib.sha256(f"{client_key}\0{salt}".encode()).hexdigest()[:32] if client_key or salt else ""


# the validators, for the other endpoints' modules (anthropic_api, embeddings, infill)
number, integer, boolean, stops = _number, _integer, _bool, _stops


def new_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]


def usage(metrics: dict[str, Any]) -> dict[str, Any]:
    prompt = int(metrics.get("prompt_tokens", 0))
    completion = int(metrics.get("completion_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(metrics.get("cache_n", 0))}}


def timings(metrics: dict[str, Any]) -> dict[str, Any]:
    """llama-server's timings, and what the grammar cost when the request had one."""
    out = {k: metrics.get(k, 0) for k in TIMING_KEYS}
    out.update({k: metrics[k] for k in GRAMMAR_TIMING_KEYS if k in metrics})
    return out


def completion_body(parsed: ParsedRequest, cid: str, model: str, text: str, finish: str,
                    metrics: dict[str, Any]) -> dict[str, Any]:
    echo = (parsed.generate.prompt or "") if parsed.output.echo and not parsed.chat else ""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish,
                              "logprobs": response_logprobs(parsed.output, parsed.chat, metrics.get("logprobs"))}
    if parsed.chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = echo + text
    return {"id": cid, "object": "chat.completion" if parsed.chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [choice], "usage": usage(metrics),
            "timings": timings(metrics)}


def chunk_body(parsed: ParsedRequest, cid: str, model: str, created: int, text: str | None,
               finish: str | None = None, role: bool = False,
               logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish,
                              "logprobs": response_logprobs(parsed.output, parsed.chat, logprobs) if logprobs
                              else None}
    if parsed.chat:
        delta: dict[str, Any] = {"role": "assistant"} if role else {}
        if text is not None:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text or ""
    return {"id": cid, "object": "chat.completion.chunk" if parsed.chat else "text_completion",
            "created": created, "model": model, "choices": [choice]}


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()
