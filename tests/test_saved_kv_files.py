"""Saved KV files without llama.cpp: a file reads back as written, every kind of damage is refused with a reason,
a mismatched model/context/KV type is named, and the folder keeps to its budget, least recently used first."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

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
