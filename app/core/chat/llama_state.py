"""llama.cpp's state of one sequence (`llama_state_seq_get_data`), read far enough to bound what it claims
before `llama_state_seq_set_data` sees it.

A saved state's checksum (app.core.chat.saved_kv) only says the bytes are the ones written with it: anyone who can
change them can also recompute it. llama.cpp checks a restored state's types and row sizes against the model,
but takes each cell's position as it comes (it restores a position of -1, 0xffffffff on disk, without a
word). So the cells are read here first, and a state is used only when they are exactly those of the tokens
saved beside it: each position once, within the context, the full cache holding every token.

The layout, as llama.cpp vendored by llama-cpp-python 0.3.36 writes it (llama-context.cpp
`state_seq_get_data`, llama-kv-cache.cpp `state_write`, `state_write_meta`, `state_write_data`), all numbers
in the machine's byte order:

    u32 magic 0xaf143cd8, i32 seq_id
    one section per KV cache (one; two for a sliding-window model, the full cache first, then the window's):
      u32 n_stream, then for each stream u32 cell_count and, unless it is 0:
        cell_count x (i32 pos, u32 n_seq_id, [i32 x, i32 y, i32 token: models that keep a cell's token or
                      2-D position], n_seq_id x i32 seq_id)
        u32 v_trans, u32 n_layer, n_layer x (i32 k_type, u64 k_row_bytes, cell_count rows)
        V of each layer that has one: (i32 v_type, u64 v_row_bytes, cell_count rows), or when transposed
        (i32 v_type, u32 v_element_bytes, u32 n_embd_v, n_embd_v x cell_count elements)

Whether cells carry the optional fields, and whether layers have V, are not written down: every reading that
accounts for each byte is tried, and each one must pass. Caches of other kinds (recurrent and hybrid models)
write other layouts: their states cannot be checked, so they are neither restored nor saved.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from typing import TypeAlias

MAGIC = 0xAF143CD8
MAX_SECTIONS = 4  # the caches one model keeps side by side (full + sliding window, or a cache + its indexer)
MAX_STREAMS = 256
MAX_LAYERS = 4096
MAX_TYPE = 256  # ggml types number about 40: a larger one is not a type field
_U32 = struct.Struct("=I")
_I32 = struct.Struct("=i")
_U64 = struct.Struct("=Q")
_PLAIN, _EXT = 3, 6  # ints a cell takes (one sequence id): pos, n_seq_id, seq_id / pos, n_seq_id, x, y, tok, seq_id

Section: TypeAlias = "list[array[int]]"  # the cells of each stream that holds any, as ints (`_PLAIN` or `_EXT` a cell)


class StateError(ValueError):
    """The state claims something it may not, or cannot be read; the message says what, for the user."""


def check(state: bytes | bytearray | memoryview, tokens: list[int], n_ctx: int, n_vocab: int | None = None) -> None:
    """Raise StateError unless `state` is a sequence state of exactly `tokens` in a context of `n_ctx`."""
    n = len(tokens)
    if n > n_ctx:
        raise StateError(f"it holds {n:,} tokens, more than the context's {n_ctx:,}")
    if n_vocab is not None:
        bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise StateError(f"its tokens include {bad}, which is not in the model's vocabulary")
    mv = memoryview(state).cast("B")
    if len(mv) < 8 or _U32.unpack_from(mv, 0)[0] != MAGIC:
        raise StateError("its state is not one llama.cpp wrote for a sequence")
    readings = [(ints, sections) for ints in (_PLAIN, _EXT) for sections in _readings(mv, 8, ints, 0)]
    if not readings:
        raise StateError("its state is not laid out as a KV cache Roofline can check")
    for ints, sections in readings:
        problem = _problem(sections, ints, tokens, n_ctx)
        if problem:
            raise StateError(problem)


def _readings(mv: memoryview, off: int, ints: int, depth: int) -> Iterator[list[Section]]:
    """Every way to read the sections from `off` that ends exactly at the end of the state."""
    if off == len(mv) and depth:
        yield []
    if depth == MAX_SECTIONS or off >= len(mv):
        return
    ends: set[int] = set()
    for with_v in (True, False):
        got = _section(mv, off, ints, with_v)
        if got is None or got[1] in ends:
            continue
        ends.add(got[1])
        for rest in _readings(mv, got[1], ints, depth + 1):
            yield [got[0], *rest]


def _section(mv: memoryview, off: int, ints: int, with_v: bool) -> tuple[Section, int] | None:
    """One KV cache's part of the state and where it ends, or None when the bytes are not one."""
    try:
        (n_stream,) = _U32.unpack_from(mv, off)
        off += 4
        if not 1 <= n_stream <= MAX_STREAMS:
            return None
        streams: Section = []
        for _ in range(n_stream):
            (count,) = _U32.unpack_from(mv, off)
            off += 4
            if count == 0:
                continue
            end = off + count * ints * 4
            if end > len(mv):
                return None
            cells = array("i")
            cells.frombytes(mv[off:end])
            if cells[1::ints].count(1) != count:  # one sequence a cell: what a sequence's state holds
                return None
            streams.append(cells)
            off = _rows(mv, end, count, with_v)
            if off < 0:
                return None
        return streams, off
    except struct.error:  # a field past the end
        return None


def _rows(mv: memoryview, off: int, count: int, with_v: bool) -> int:
    """Past the K and V rows of one stream's cells; -1 when they do not fit."""
    v_trans, n_layer = _U32.unpack_from(mv, off)[0], _U32.unpack_from(mv, off + 4)[0]
    off += 8
    if v_trans > 1 or n_layer > MAX_LAYERS:
        return -1
    for tensor in range(2 * n_layer if with_v else n_layer):
        (kind,) = _I32.unpack_from(mv, off)
        if not 0 <= kind < MAX_TYPE:
            return -1
        if tensor >= n_layer and v_trans:
            element, n_embd = _U32.unpack_from(mv, off + 4)[0], _U32.unpack_from(mv, off + 8)[0]
            off += 12 + n_embd * count * element
            ok = element > 0 and n_embd > 0
        else:
            (row,) = _U64.unpack_from(mv, off + 4)
            off += 12 + count * row
            ok = row > 0
        if not ok or off > len(mv):
            return -1
    return off


def _problem(sections: list[Section], ints: int, tokens: list[int], n_ctx: int) -> str | None:
    """What one reading of the state claims that it may not, in words; None when it holds exactly `tokens`."""
    n = len(tokens)
    for i, streams in enumerate(sections):
        cells = array("i")
        for stream in streams:
            cells.extend(stream)
        positions = cells[0::ints]
        bad = next((p for p in positions if not 0 <= p < n), None)
        if bad is not None:
            raw = f" ({bad & 0xFFFFFFFF:#x})" if bad < 0 else ""  # as the file has it: 0xffffffff is -1
            return f"a cell of its state claims position {bad}{raw}, outside its {n:,} tokens"
        if cells[ints - 1::ints].count(0) != len(positions):
            return "its state holds cells of another sequence"
        # the full cache holds every token; a sliding window's, the latest ones
        first = 0 if i == 0 else n - len(positions)
        if len(positions) > n or sorted(positions) != list(range(first, n)):
            return (f"its state holds {len(positions):,} cells for {n:,} tokens" if i == 0 and len(positions) != n
                    else "its cells' positions are not those of its tokens")
        if ints == _EXT:
            if any(tokens[p] != t for p, t in zip(positions, cells[4::ints], strict=False)):
                return "the tokens in its state are not the chat's tokens saved with it"
            if any(not 0 <= c < n_ctx for c in (*cells[2::ints], *cells[3::ints])):
                return "a cell of its state claims a 2-D position outside the context"
    return None
