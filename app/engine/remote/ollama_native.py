"""Ollama's native API for the remote backend: its /v1 answers carry only `usage`, while each reply of /api/chat
(and /api/generate, for raw prompts) ends with the server's own prefill and decode numbers
(app.core.remote.ollama). So when the server is Ollama, a reply streams there instead.

What is sent and read follows Ollama's `api/types.go`: ChatRequest (model, messages, stream, options) and
GenerateRequest (prompt, raw); Options' temperature, top_p, top_k, min_p, repeat_penalty, num_predict, seed,
stop; a stream of JSON lines (`application/x-ndjson`), each a ChatResponse (`message` with `content` and
`thinking`) or GenerateResponse (`response`, `thinking`), the last one `"done": true` with its `done_reason`
and Metrics; an error mid-stream is a line `{"error": "..."}`. No `think` is sent (the server's default, as
on /v1); the thinking it sends apart is kept apart, and inline `<think>` is split as for any server.

Everything the server sends is read as from any server: each line bounded (app.engine.remote.http.json_lines),
a line that is not a JSON object skipped, the numbers checked (a note for each one left out).
"""

from __future__ import annotations

import json
import time
from typing import Any

from app.core.remote.engines import OLLAMA, engine_from_answer
from app.core.remote.ollama import REPLY, REPLY_SOURCE, reply_measures, reply_numbers
from app.engine import protocol as P
from app.engine.remote.http import NETWORK_ERRORS, new_client
from app.engine.remote.openai_stream import Chunk, error_of, json_object
from app.engine.remote.server_timings import apply_server_timings, reply_metrics

SOURCE = REPLY_SOURCE
PROBE_TIMEOUT_S = 3.0  # GET /api/version at connect: a server that does not answer it soon is not Ollama
PROBE_BYTES = 64 << 10  # {"version": "0.13.0"} is a few bytes


def answers_as_ollama(url: str, headers: dict[str, str], timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether GET `url` (the server's /api/version) answers as Ollama does, read within `timeout` and
    PROBE_BYTES; any failure, a slow or long answer included, is no."""
    deadline = time.monotonic() + timeout
    body = b""
    try:
        with new_client(timeout) as http, http.stream("GET", url, headers=headers) as resp:
            if resp.status_code != 200:
                return False
            for chunk in resp.iter_raw():
                body += chunk
                if len(body) > PROBE_BYTES or time.monotonic() > deadline:
                    return False
        data = json.loads(body)
    except (*NETWORK_ERRORS, ValueError, RecursionError):
        return False
    return engine_from_answer("/api/version", data) == OLLAMA


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI's content parts: their text
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def _arguments(value: Any) -> dict[str, Any]:
    """A tool call's arguments as Ollama takes them, an object (OpenAI's are a JSON string)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return {}
    return value if isinstance(value, dict) else {}


def native_message(m: dict[str, Any]) -> dict[str, Any]:
    """One chat message as Ollama's Message: role and content, an assistant's tool calls, a tool result's id."""
    out: dict[str, Any] = {"role": str(m.get("role") or "user"), "content": _text(m.get("content"))}
    calls = m.get("tool_calls")
    functions = [c.get("function") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    if functions:
        out["tool_calls"] = [{"function": {"name": str(f.get("name", "")), "arguments": _arguments(f.get("arguments"))}}
                             for f in functions if isinstance(f, dict)]
    for key, name in (("tool_call_id", "tool_call_id"), ("name", "tool_name")):
        if isinstance(m.get(key), str):
            out[name] = m[key]
    return out


def native_request(req: P.Generate, model: str | None) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of the streamed native request for `req`: /api/chat, or /api/generate (raw) for a prompt."""
    s = req.sampling
    options: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "min_p": s.min_p,
                               "repeat_penalty": s.repeat_penalty, "num_predict": s.max_tokens}
    if s.seed is not None and s.seed >= 0:
        options["seed"] = s.seed
    if s.stop:
        options["stop"] = list(s.stop)
    body: dict[str, Any] = {"model": model or "default", "stream": True, "options": options}
    if req.messages is not None:
        body["messages"] = [native_message(m) for m in req.messages]
        return "/api/chat", body
    body.update(prompt=req.prompt or "", raw=True)  # raw: no template, a continuation as on /v1/completions
    return "/api/generate", body


def parse_line(line: str) -> Chunk | None:
    """The chunk in one line of the native stream; None for anything that is not a JSON object."""
    data = json_object(line)
    if data is None:
        return None
    chunk = Chunk(error=error_of(data))
    if chunk.error is not None:
        return chunk
    message = data.get("message")
    part = message if isinstance(message, dict) else data  # /api/chat's message, /api/generate's own fields
    text, thought = part.get("content" if part is message else "response"), part.get("thinking")
    text, thought = (text if isinstance(text, str) else ""), (thought if isinstance(thought, str) else "")
    if text or thought:
        chunk.texts.append(text)
        chunk.reasoning.append(thought)
    if data.get("done") is True:
        chunk.last = data
        chunk.finish = "length" if data.get("done_reason") == "length" else "stop"
        numbers, _ = reply_numbers(data)  # its notes come once, with the reply's metrics (native_metrics)
        if "prompt_eval_count" in numbers:
            chunk.usage = {"prompt_tokens": int(numbers["prompt_eval_count"])}
    return chunk


def native_metrics(client: dict[str, Any], last: dict[str, Any] | None, reasoning: dict[str, Any]) -> dict[str, Any]:
    """Done's metrics of a native reply: the client's view, with prefill and decode from Ollama's numbers in
    the last object where they are usable (as llama-server's `timings` are), its checked numbers under
    REPLY, and a note for each number left out."""
    data = reply_metrics(client, None, reasoning)
    if last is None:
        return data  # cancelled or cut before the last line: nothing of the server's
    m = reply_measures(last)
    if m is None:
        data["server_notes"].append("Ollama's reply carried no prefill or decode numbers: only the client's clock")
        return data
    data["server_notes"] += m.notes
    numbers, _ = reply_numbers(last)
    if m.prefill_tps is not None:
        timings = {"prompt_n": numbers["prompt_eval_count"], "prompt_ms": numbers["prompt_eval_duration"] / 1e6}
    elif m.decode_tps is not None and not numbers.get("prompt_eval_count") and not numbers.get("prompt_eval_duration") \
            and not any("prompt_eval" in note for note in m.notes):
        timings = {"prompt_n": 0.0, "prompt_ms": 0.0}  # the prompt was all in its cache (Ollama leaves out zeros)
    else:
        return data
    if m.decode_tps is not None:
        timings.update(predicted_n=numbers["eval_count"], predicted_ms=numbers["eval_duration"] / 1e6)
    out = apply_server_timings(data, timings)
    out["source"] = SOURCE
    out[REPLY] = numbers
    return out
