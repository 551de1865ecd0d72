"""Saved KV files without llama.cpp: a file reads back as written, every kind of damage is refused with a reason,
a mismatched model/context/KV type is named, and the folder keeps to its budget, least recently used first.
A FIFO (or any file that is not a regular one) at a state's path is refused at once; llama.cpp's state is read
far enough to refuse cells its tokens do not have (app.core.chat.llama_state), before llama.cpp would see them."""

from __future__ import annotations

import os
import stat
import struct
import time
from pathlib import Path

import pytest

from app.core.chat import llama_state as L
from app.core.chat import saved_kv as S

KEY = {"model": "/m/a.gguf", "model_bytes": 10, "model_mtime_ns": 1, "n_ctx": 1024, "type_k": "f16",
       "type_v": "f16", "flash_attn": False, "swa_full": True, "llama_cpp": "0.3.36"}


def _write(folder: Path, conv: str, n_bytes: int, tokens: list[int] | None = None) -> Path:
    path = S.file_for(folder, conv)
    S.write_state(path, KEY, tokens or [1, 2, 3], bytes(range(256)) * (n_bytes // 256), 0.5)
    return path


def test_a_state_reads_back_as_written_privately(tmp_path: Path) -> None:
    path = _write(tmp_path, "chat-1", 4096, [5, 6, 7, 8])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "chat-1" not in path.name  # no chat id on disk
    header = S.read_header(path)
    assert header.tokens == [5, 6, 7, 8] and header.key == KEY and header.prefill_ms_per_token == 0.5
    assert bytes(S.read_state(path, header)) == bytes(range(256)) * 16
    assert S.default_dir().parent == S.paths.data_dir()
    assert stat.S_IMODE(S.default_dir().stat().st_mode) == 0o700


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda raw: raw[: len(raw) - 100], "it is cut short"),
    (lambda raw: raw + b"x", "it has bytes it should not"),
    (lambda raw: raw[:-300] + b"\0" * 300, "it is damaged (checksum mismatch)"),
    (lambda raw: b"not a kv file at all", "it is not a saved KV file"),
    (lambda raw: raw[:14] + b"{" + raw[15:], "its header is damaged"),
    (lambda raw: raw[:len(S.MAGIC)] + b"\xff\xff\xff\x7f" + raw[len(S.MAGIC) + 4:], "its header is damaged"),
    (lambda raw: raw[:len(S.MAGIC) + 2], "it is cut short"),
])
def test_damaged_files_are_refused_with_the_reason(tmp_path: Path, damage, reason: str) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, "c", 2048)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(S.SavedKvError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        S.read_state(path, S.read_header(path))


def test_a_mismatch_names_what_differs() -> None:
    assert S.key_mismatch(KEY, dict(KEY)) is None
    assert S.key_mismatch(KEY, {**KEY, "n_ctx": 2048}) == \
        "it was made with context size 1024, the model is loaded with 2048"
    assert S.key_mismatch(KEY, {**KEY, "type_v": "q8_0"}) == \
        "it was made with V cache type 'f16', the model is loaded with 'q8_0'"
    assert S.key_mismatch(KEY, {**KEY, "model_bytes": 11}) == "it was made with a different version of the model file"
    assert S.key_mismatch(KEY, {**KEY, "model": "/m/b.gguf"}) == "it was made with another model file"


def test_the_folder_keeps_to_its_budget_least_recently_used_first(tmp_path: Path) -> None:
    tmp_path = tmp_path / "kv"
    a, b, c = (_write(tmp_path, name, 64 << 10) for name in "abc")
    size = a.stat().st_size
    now = time.time()
    for i, p in enumerate((a, b, c)):
        os.utime(p, (now - 100 + i, now - 100 + i))  # a oldest, c newest
    S.read_state(a, S.read_header(a))  # a restore: a is now the most recently used
    d = _write(tmp_path, "d", 64 << 10)
    removed = S.enforce_budget(tmp_path, 2 * size + size // 2, keep=d)
    assert removed == [b, c]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([a.name, d.name])
    assert S.folder_bytes(tmp_path) <= 2 * size + size // 2
    # the one just written goes last, even when it is the oldest by time stamp
    os.utime(d, (now - 1000, now - 1000))
    # d's own size: headers differ by a byte or two (the time stamp's digits)
    assert S.enforce_budget(tmp_path, d.stat().st_size, keep=d) == [a]
    assert S.enforce_budget(tmp_path, 0) == [d]


def test_a_half_written_file_of_a_dead_engine_is_cleared(tmp_path: Path) -> None:
    tmp_path = tmp_path / "kv"
    tmp_path.mkdir()
    stale = tmp_path / ("x" * 32 + S.SUFFIX + ".tmp-999999")
    stale.write_bytes(b"partial")
    fresh = tmp_path / ("y" * 32 + S.SUFFIX + ".tmp-1")
    fresh.write_bytes(b"being written now")
    old = time.time() - S.STALE_TMP_S - 5
    os.utime(stale, (old, old))
    S.enforce_budget(tmp_path, 1 << 30)
    assert not stale.exists() and fresh.exists()


@pytest.mark.timeout(30)  # a guard: before the fix, opening the FIFO waited for a writer forever
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_at_the_state_path_is_refused_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "chat-1", 4096)
    header = S.read_header(path)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(S.SavedKvError, match=r"^it is not a regular file \(a FIFO\)$"):
        S.read_header(path)
    with pytest.raises(S.SavedKvError, match=r"^it is not a regular file \(a FIFO\)$"):
        S.read_state(path, header)  # the file changed between the header and the state
    target = _write(tmp_path, "chat-2", 4096)
    link = tmp_path / "link.kv"
    link.symlink_to(target)  # a link to a state reads as before; a link to a FIFO is a FIFO
    assert S.read_header(link).tokens == [1, 2, 3]
    path.rename(tmp_path / "fifo")
    link.unlink()
    link.symlink_to(tmp_path / "fifo")
    with pytest.raises(S.SavedKvError, match="not a regular file"):
        S.read_header(link)
    with pytest.raises(S.SavedKvError, match=r"not a regular file \(a folder\)|could not be read"):
        S.read_header(tmp_path)


# ------------------------------------------------------------------ llama.cpp's sequence state
def _cells(positions: list[int], tokens: list[int] | None, seq: int = 0) -> bytes:
    out = b""
    for p in positions:
        out += struct.pack("=iI", p, 1)
        if tokens is not None:  # the optional x, y and token of a cell
            out += struct.pack("=iii", 0, 0, tokens[p] if 0 <= p < len(tokens) else 0)
        out += struct.pack("=i", seq)
    return out


def _kv_section(positions: list[int], tokens: list[int] | None = None, n_layer: int = 2, v_trans: bool = False,
                with_v: bool = True, seq: int = 0) -> bytes:
    """One KV cache's part of a sequence state, laid out as llama.cpp writes it (llama-kv-cache.cpp)."""
    n = len(positions)
    out = struct.pack("=II", 1, n)  # one stream, its cells
    if not n:
        return out
    out += _cells(positions, tokens, seq) + struct.pack("=II", int(v_trans), n_layer)
    for _ in range(n_layer):
        out += struct.pack("=iQ", 1, 8) + b"\x11" * (8 * n)  # f16 K rows of 8 bytes
    for _ in range(n_layer if with_v else 0):
        if v_trans:
            out += struct.pack("=iII", 1, 2, 4) + b"\x22" * (4 * n * 2)
        else:
            out += struct.pack("=iQ", 1, 8) + b"\x22" * (8 * n)
    return out


def _state(*sections: bytes) -> bytes:
    return struct.pack("=Ii", L.MAGIC, 0) + b"".join(sections)


TOKENS = [7, 8, 9, 10, 11, 12]


@pytest.mark.parametrize("state", [
    _state(_kv_section([0, 1, 2, 3, 4, 5])),
    _state(_kv_section([3, 4, 5, 0, 1, 2], v_trans=True)),  # cells need not be in order
    _state(_kv_section(list(range(6))), _kv_section([3, 4, 5])),  # the full cache, then a sliding window's
    _state(_kv_section(list(range(6)), with_v=False)),  # a cache without V (MLA)
    _state(_kv_section(list(range(6)), TOKENS)),  # cells that keep their token
])
def test_an_honest_llama_state_passes(state: bytes) -> None:
    L.check(state, TOKENS, n_ctx=8, n_vocab=100)
    S.check_claims(state, TOKENS, 8, 100)


@pytest.mark.parametrize(("state", "tokens", "reason"), [
    (_state(_kv_section([0, 1, 2, -1, 4, 5])), TOKENS, r"claims position -1 \(0xffffffff\), outside its 6 tokens"),
    (_state(_kv_section([0, 1, 2, 3, 4, 5000])), TOKENS, "claims position 5000"),
    (_state(_kv_section(list(range(6)))), TOKENS[:5], "claims position 5, outside its 5 tokens"),
    (_state(_kv_section(list(range(5)))), TOKENS, "its state holds 5 cells for 6 tokens"),
    (_state(_kv_section([0, 1, 2, 2, 4, 5])), TOKENS, "positions are not those of its tokens"),
    (_state(_kv_section(list(range(6))), _kv_section([0, 1, 2])), TOKENS, "positions are not those of its tokens"),
    (_state(_kv_section(list(range(6)), seq=3)), TOKENS, "cells of another sequence"),
    (_state(_kv_section(list(range(6)), [7, 8, 9, 10, 11, 99])), TOKENS, "not the chat's tokens saved with it"),
    (_state(_kv_section(list(range(6))))[:-1], TOKENS, "not laid out as a KV cache Roofline can check"),
    (_state(_kv_section(list(range(6)))) + b"\0", TOKENS, "not laid out as a KV cache Roofline can check"),
    (b"\x01\x00\x00\x00" + b"\xff" * 4000, TOKENS, "not one llama.cpp wrote for a sequence"),
    (_state(_kv_section(list(range(6)))), [7, 8, 9, 10, 11, 100], "tokens include 100, which is not in the model"),
    (_state(_kv_section(list(range(9)))), list(range(9)), "it holds 9 tokens, more than the context's 8"),
])
def test_a_state_claiming_what_its_tokens_do_not_have_is_refused(state: bytes, tokens: list[int], reason: str) -> None:
    with pytest.raises(S.SavedKvError, match=reason):
        S.check_claims(state, tokens, 8, 100)
