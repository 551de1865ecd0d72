"""What an OpenAI-style server is sent (the streamed request's body) and what it sends, read defensively:
the JSON chunk in one server-sent event's data, and the phase metrics the client can measure from the
arrival times of the chunks.

A server is untrusted input: nothing it sends is read without a bound (an endless /v1/models body once took
2 GB of memory; 3,000 events of 1 MB text once took a reply to 3 GB), a chunk of an unexpected shape is
skipped rather than trusted, and a number in `usage` is used only when it is a plausible count (a list there
once ended the reply in a TypeError, 1e400 in an OverflowError, and -5 or 1e300 were printed as they came).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.core.files.untrusted import clean_line, shown, whole_number
from app.core.metrics.phase import PhaseMetrics, rate
from app.engine import protocol as P

SOURCE = "client-side wall clock"
MAX_JSON_BYTES = 8 << 20  # /v1/models: a few KiB in practice
MAX_ERROR_BYTES = 64 << 10  # an error body: only its first few hundred characters are shown
MAX_EVENT_BYTES = 1 << 20  # one server-sent event (one token's chunk), its unfinished line included
MAX_REPLY_CHUNKS = 1 << 20  # one whole reply (a chunk is a token or a few): far beyond any context window
# One whole reply's text, answer and reasoning together (UTF-8 bytes): 8 MiB is about two million tokens of
# English, beyond any context window, and what the client holds of one reply stays bounded.
MAX_REPLY_BYTES = 8 << 20
MAX_TOKENS = 1 << 24  # a token count a server reports: above the largest context windows (10M tokens)
MAX_TOKENS_PER_S = 1e7  # a rate a server's numbers imply: far past any hardware, so a claim past it is false
MAX_MODEL_COUNT = 1 << 50  # a model's parameters or bytes as a server lists them: a petabyte is past any model
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
    timings: dict[str, Any] | None = None  # llama-server's block, as sent (app.engine.remote.server_timings reads it)
    error: str | None = None
    done: bool = False
    last: dict[str, Any] | None = None  # Ollama's native `done` object, its numbers (app.engine.remote.ollama_native)


def _json_int(digits: str) -> int | float:
    # Beyond 4,300 digits int() refuses (and would cost quadratic time): a float (inf) then, refused later
    # as a count, rather than the whole chunk with its text unreadable.
    return int(digits) if len(digits) <= 20 else float(digits)


def json_object(text: str) -> dict[str, Any] | None:
    """A server's line or event as a JSON object (its huge numbers bounded); None for anything else."""
    try:
        data = json.loads(text, parse_int=_json_int)
    except (ValueError, RecursionError):  # RecursionError: `[[[[...` nested deeper than the parser goes
        return None
    return data if isinstance(data, dict) else None


def error_of(data: dict[str, Any]) -> str | None:
    """The server's error message in an object ({"error": "..."} or {"error": {"message": ...}}), else None."""
    err = data.get("error")
    if isinstance(err, (dict, str)):
        return str(err.get("message", err) if isinstance(err, dict) else err)
    return None


def parse_data(data: str) -> Chunk | None:
    """The chunk in one event's data; None for anything that is not a JSON object."""
    payload = data.strip()
    if payload == "[DONE]":
        return Chunk(done=True)
    obj = json_object(payload)
    if obj is None:
        return None
    chunk = Chunk(error=error_of(obj))
    if chunk.error is not None:
        return chunk
    if isinstance(obj.get("usage"), dict):
        chunk.usage = obj["usage"]
    if isinstance(obj.get("timings"), dict):
        chunk.timings = obj["timings"]
    choices = obj.get("choices")
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


class ReplySize:
    """How much of one reply has arrived, against its bounds: MAX_REPLY_CHUNKS pieces and MAX_REPLY_BYTES of
    text, answer and reasoning together (UTF-8), so that a server streaming without end cannot grow the client
    without bound (3,000 events of 1 MB once took it to 3 GB)."""

    def __init__(self, where: str) -> None:
        self.where = where  # the server, as messages name it
        self.pieces = 0
        self.bytes = 0

    def over(self, text: str, thought: str) -> str | None:
        """Count one piece of reply (its text and reasoning); why the reply stops when that takes it past a
        bound (the piece is then not kept), else None."""
        self.pieces += 1
        self.bytes += utf8_size(text) + utf8_size(thought)
        if self.bytes > MAX_REPLY_BYTES:
            return (f"The server at {self.where} sent more than {MAX_REPLY_BYTES >> 20} MiB of reply text "
                    "(answer and reasoning together; a broken or hostile server?): stopped there, the text "
                    "before it kept.")
        return self.too_much() if self.pieces > MAX_REPLY_CHUNKS else None

    def too_much(self) -> str:
        return (f"The server at {self.where} sent more than a reply can hold (an event over "
                f"{MAX_EVENT_BYTES:,} bytes or over {MAX_REPLY_CHUNKS:,} chunks): stopped.")


def utf8_size(text: str) -> int:
    """The size of `text` in UTF-8 (lone surrogates, which JSON can carry, as 3 bytes each)."""
    # isascii() is a flag lookup: the common case costs nothing, however long the piece
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def listed_models(data: Any) -> list[dict[str, Any]]:
    """The model entries of a /v1/models answer: its objects (anything else in their place is skipped)."""
    models = data.get("data") if isinstance(data, dict) else None
    return [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []


def model_facts(models: list[dict[str, Any]], model: str) -> tuple[dict[str, int], list[str]]:
    """llama-server's `meta` for `model` as P.Loaded's counts (0 when absent or not a plausible count), and a
    one-line note for each one left out."""
    meta = next((m.get("meta") for m in models if m.get("id") == model), None)
    meta = meta if isinstance(meta, dict) else {}
    facts: dict[str, int] = {}
    notes: list[str] = []
    for key, name, limit in (("n_ctx", "n_ctx", MAX_TOKENS), ("n_ctx_train", "n_ctx_train", MAX_TOKENS),
                             ("n_vocab", "n_vocab", MAX_TOKENS), ("n_params", "n_params", MAX_MODEL_COUNT),
                             ("size", "model_size", MAX_MODEL_COUNT)):
        value = None if meta.get(key) is None else whole_number(meta[key], limit)
        if meta.get(key) is not None and value is None:
            notes.append(f"note: the server's meta.{key} ({shown(meta[key])}) is not a count: ignored")
        facts[name] = value or 0
    return facts, notes


def remote_loaded(where: str, host: str, model: str, ids: list[str], facts: dict[str, int], load_ms: float) -> P.Loaded:
    """The Loaded of a remote model: what the server listed (`ids`, llama-server's `facts`), nothing local."""
    return P.Loaded(
        model_path=f"{where}/v1 (model {model})", load_ms=load_ms, **facts, architecture="remote",
        model_desc=f"{clean_line(model.rstrip('/').rsplit('/', 1)[-1], 120)} (remote)",  # bidi shown
        chat_template_name=f"the server at {host}", chat_template_source="server",
        n_gpu_layers=0, type_k="", type_v="", flash_attn=None, swa_full=False, buffers_mib={},
        kv_bytes_allocated=0, kv_cells_allocated=0, n_threads=0, n_threads_batch=0, rss_bytes=0,
        metadata={"remote.models": ",".join(ids)}, tool_format="",  # the remote server parses its own calls
    )


def read_usage(usage: dict[str, Any], chunks: int) -> tuple[dict[str, Any], list[str]]:
    """The counts of a server's `usage` that are whole numbers in 0..MAX_TOKENS, and a one-line note for
    each one sent that is not (a list, a string, a boolean, a fraction, a negative, infinity, 1e300);
    instead of the reply's token count, the `chunks` that arrived."""
    clean: dict[str, Any] = {}
    notes: list[str] = []

    def count(block: dict[str, Any], key: str, name: str, instead: str = "") -> int | None:
        if key not in block or block[key] is None:
            return None
        value = whole_number(block[key], MAX_TOKENS)
        if value is None:
            notes.append(f"the server's {name} ({shown(block[key])}) is not a token count: ignored{instead}")
        return value

    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        instead = f", {chunks} chunks counted instead" if key == "completion_tokens" else ""
        if (n := count(usage, key, f"usage.{key}", instead)) is not None:
            clean[key] = n
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        n = count(details, "reasoning_tokens", "usage.completion_tokens_details.reasoning_tokens")
        if n is not None:
            clean["completion_tokens_details"] = {"reasoning_tokens": n}
    return clean, notes


def client_metrics(t_request: float, t_end: float, ttft_ms: float, times: list[float],
                   usage: dict[str, Any], chat: bool) -> dict[str, Any]:
    """Phase metrics as the client sees them (network and queueing included); of the server's `usage`
    only the plausible counts (read_usage), with a note in `server_notes` for each one left out."""
    usage, notes = read_usage(usage, len(times))
    metrics = PhaseMetrics(source=SOURCE)
    metrics.ttft_ms = ttft_ms
    decode_wall_ms = (times[-1] - times[0]) * 1000.0 if len(times) > 1 else 0.0
    claimed = usage.get("completion_tokens", 0)
    if rate(claimed - 1, decode_wall_ms) > MAX_TOKENS_PER_S:  # e.g. 16M tokens claimed for chunks 1 ms apart
        notes.append(f"the server's usage.completion_tokens ({claimed}) would mean over {MAX_TOKENS_PER_S:,.0f} "
                     f"tok/s: ignored, {len(times)} chunks counted instead")
        claimed = 0
        del usage["completion_tokens"]
    n_gen = claimed or len(times)
    metrics.prompt_tokens = metrics.prefill_tokens = usage.get("prompt_tokens", 0)
    metrics.prefill_ms = ttft_ms  # network + queueing + prefill: all the client can see
    metrics.generated_tokens = n_gen
    metrics.itl_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
    metrics.decode_wall_ms = decode_wall_ms
    metrics.decode_tokens = max(0, n_gen - 1)
    metrics.decode_ms = metrics.decode_wall_ms
    metrics.total_ms = (t_end - t_request) * 1000.0
    data = metrics.to_dict()
    data["token_times"] = times
    data["chunks"] = len(times)
    data["usage"] = usage
    data["server_notes"] = notes
    data["chat_template"] = "server" if chat else "none"
    return data
