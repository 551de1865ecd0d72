"""What an OpenAI-style server is sent (the streamed request's body) and what it sends, read defensively:
the JSON chunk in one server-sent event's data, and the phase metrics the client can measure from the
arrival times of the chunks.

A server is untrusted input: nothing it sends is read without a bound (an endless /v1/models body once took
2 GB of memory), and a chunk of an unexpected shape is skipped rather than trusted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P

SOURCE = "client-side wall clock"
MAX_JSON_BYTES = 8 << 20  # /v1/models: a few KiB in practice
MAX_ERROR_BYTES = 64 << 10  # an error body: only its first few hundred characters are shown
MAX_EVENT_BYTES = 1 << 20  # one server-sent event (one token's chunk), its unfinished line included
MAX_REPLY_CHUNKS = 1 << 20  # one whole reply (a chunk is a token or a few): far beyond any context window
LLAMA_EXTRAS = ("top_k", "min_p", "repeat_penalty")  # llama.cpp-family servers accept these; OpenAI does not


def request_body(req: P.Generate, model: str | None, extras: bool) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of the streamed request for `req`; `extras` adds llama.cpp's sampling fields."""
    s = req.sampling
    body: dict[str, Any] = {"model": model or "default", "stream": True, "max_tokens": s.max_tokens,
                            "temperature": s.temperature, "top_p": s.top_p,
                            "stream_options": {"include_usage": True}}
    if s.seed is not None and s.seed >= 0:
        body["seed"] = s.seed
    if s.stop:
        body["stop"] = s.stop
    if extras:
        body.update({k: getattr(s, k) for k in LLAMA_EXTRAS})
        if s.ignore_eos:
            body["ignore_eos"] = True
    if req.messages is not None:
        body["messages"] = req.messages
        return "/v1/chat/completions", body
    body["prompt"] = req.prompt or ""
    return "/v1/completions", body


@dataclass
class Chunk:
    """One event's data: the texts it adds, its finish reason, usage, an error, or the end of the stream."""

    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)  # beside each text: its `reasoning_content` ("" if none)
    finish: str | None = None  # "stop" | "length"
    usage: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False


def parse_data(data: str) -> Chunk | None:
    """The chunk in one event's data; None for anything that is not a JSON object."""
    payload = data.strip()
    if payload == "[DONE]":
        return Chunk(done=True)
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    chunk = Chunk()
    err = data.get("error")
    if isinstance(err, (dict, str)):
        chunk.error = str(err.get("message", err) if isinstance(err, dict) else err)
        return chunk
    if isinstance(data.get("usage"), dict):
        chunk.usage = data["usage"]
    choices = data.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        text = (delta.get("content") if isinstance(delta, dict) else None) if "delta" in choice \
            else choice.get("text")
        # Thinking arrives as `reasoning_content` (llama-server --reasoning-format, vLLM, DeepSeek's API;
        # `reasoning` on some) beside or instead of content.
        thought = (delta.get("reasoning_content") or delta.get("reasoning")) if isinstance(delta, dict) else None
        text = text if isinstance(text, str) else ""
        thought = thought if isinstance(thought, str) else ""
        if text or thought:
            chunk.texts.append(text)
            chunk.reasoning.append(thought)
        if choice.get("finish_reason"):
            chunk.finish = "stop" if choice["finish_reason"] == "stop" else "length"
    return chunk


def client_metrics(t_request: float, t_end: float, ttft_ms: float, times: list[float],
                   usage: dict[str, Any], chat: bool) -> dict[str, Any]:
    """Phase metrics as the client sees them (network and queueing included)."""
    metrics = PhaseMetrics(source=SOURCE)
    metrics.ttft_ms = ttft_ms
    n_gen = int(usage.get("completion_tokens") or 0) or len(times)
    metrics.prompt_tokens = metrics.prefill_tokens = int(usage.get("prompt_tokens") or 0)
    metrics.prefill_ms = ttft_ms  # network + queueing + prefill: all the client can see
    metrics.generated_tokens = n_gen
    metrics.itl_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:])]
    metrics.decode_wall_ms = (times[-1] - times[0]) * 1000.0 if len(times) > 1 else 0.0
    metrics.decode_tokens = max(0, n_gen - 1)
    metrics.decode_ms = metrics.decode_wall_ms
    metrics.total_ms = (t_end - t_request) * 1000.0
    data = metrics.to_dict()
    data["token_times"] = times
    data["chunks"] = len(times)
    data["usage"] = usage
    data["chat_template"] = "server" if chat else "none"
    return data
