"""The batch engine's protocol: the single-request engine's messages plus its own.

Commands are the usual `Load`, `Generate`, `Cancel`, `GetStats` and `Shutdown` of app.engine.protocol; a
`Generate` is answered at once with `Accepted` (its prompt fits: the server may start streaming) or an
`Error` (kind `bad_request`: the server answers 400), then `Token` events and one `Done`. `BatchStats`
reports the whole batch (slots, KV cells) after every change of membership, at most a few times a second.
`DropCaches` (a command) forgets the cached prefixes of the idle slots. `Embed` (a command) asks for the
embeddings of texts, answered by one `Embeddings` or an `Error`; `Infill` (app.engine.batch.infill) is a
Generate laid out for fill-in-the-middle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from app.engine import protocol as P
from app.engine.batch.infill import Infill, decode_infill


@dataclass
class Accepted:
    """A request's prompt is tokenized and fits a slot; it waits for a slot or is already running."""

    type: ClassVar[str] = "accepted"
    request_id: str
    prompt_tokens: int


@dataclass
class BatchStats:
    type: ClassVar[str] = "batch_stats"
    running: int  # sequences holding a slot (prefilling or decoding)
    waiting: int  # accepted, waiting for a free slot
    n_slots: int
    n_ctx: int  # KV cells of the whole context, shared by all slots
    n_ctx_slot: int  # the most one request may use (prompt + reply)
    kv_tokens: int  # tokens held in KV by all slots, cached finished prefixes included
    kv_tokens_running: int  # held by running sequences only
    steps: int  # llama_decode calls so far
    t: float  # engine monotonic time
    max_prompt_bytes: int = 0  # a prompt longer than this (UTF-8) cannot fit a slot; 0: not known yet


@dataclass
class DropCaches:
    """Forget the prefixes finished requests left in idle slots. All slots share one pool of KV cells, and
    llama.cpp's attention spans every cell in use, cached ones too (masked): the batching sweep starts each
    stream count from empty cells so that one count's leftovers do not slow the next."""

    type: ClassVar[str] = "drop_caches"


@dataclass
class Embed:
    """The embeddings of `inputs` (texts, or token lists), one vector each, pooled as the model declares."""

    type: ClassVar[str] = "embed"
    request_id: str
    inputs: list[str | list[int]]


@dataclass
class Embeddings:
    """An Embed's answer: one L2-normalized vector per input, in order, and the tokens they took."""

    type: ClassVar[str] = "embeddings"
    request_id: str
    vectors: list[list[float]]
    prompt_tokens: int


_OWN: dict[str, type] = {Accepted.type: Accepted, BatchStats.type: BatchStats, DropCaches.type: DropCaches,
                         Embed.type: Embed, Embeddings.type: Embeddings}


def encode(msg: Any) -> str:
    return P.encode(msg)


def decode(line: str | bytes) -> Any:
    """One line into a message of this module or of app.engine.protocol (raises P.ProtocolError)."""
    try:
        data = json.loads(line)
        cls = _OWN.get(str(data.get("type"))) if isinstance(data, dict) else None
    except ValueError as exc:
        raise P.ProtocolError(f"not a protocol message: {str(line)[:200]!r}") from exc
    if cls is None and isinstance(data, dict) and data.get("type") == Infill.type:
        data.pop("type")
        try:
            return decode_infill(data)
        except TypeError as exc:
            raise P.ProtocolError(f"bad fields for Infill: {exc}") from exc
    if cls is None:
        return P.decode(line)
    data.pop("type")
    try:
        return cls(**data)
    except TypeError as exc:
        raise P.ProtocolError(f"bad fields for {cls.__name__}: {exc}") from exc
