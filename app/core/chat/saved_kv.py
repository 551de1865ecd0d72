"""Saved KV caches of conversations on disk: the file format, its checks, and the size budget.

Reopening a long chat should not cost a full prefill: after a reply the engine writes the KV cache of that
conversation (llama.cpp's per-sequence state) to one file, and when the chat's next prompt starts with the
tokens the file holds, it loads them back instead of evaluating them again. This module is the pure-Python
half (no llama.cpp): where the files live, what a file says about itself, and which files go when the
folder outgrows its budget. The engine (app.engine.llama.worker.saved_kv) does the llama.cpp half.

A file is `MAGIC`, a little-endian u32 header length, a JSON header, then llama.cpp's state bytes:

    {"key": {...what the state is only valid for...}, "tokens": [...the exact token prefix it holds...],
     "state_bytes": N, "state_sha256": "...", "prefill_ms_per_token": 0.41, "saved_at": 1764528000.0}

`key` names the model file (its real path, size and modification time), the context size, the KV cache
types, flash attention, the sliding-window layout and the llama-cpp-python version: a state made under any
other of these is refused with the field that differs, before llama.cpp sees it. The checksum catches a file
cut short or overwritten; what the state claims (its cells, their positions, the tokens beside them) is
bounded by app.core.chat.llama_state before llama.cpp sees it. Either way the engine prefills as if there were no
file, and says why. Only a regular file is read, and opening it never blocks (a FIFO put at a state's path
is refused at once instead of holding the engine until the app gives up on it).

One file per conversation (named by a hash of its id, so no chat id or title appears on disk), 0600 in a
0700 folder, written atomically. The folder's total stays within a budget (settings `saved_kv_budget_mib`;
0 turns saving and restoring off): the least recently used files go first (a restore touches its file).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from app.core.chat import llama_state
from app.core.config import paths
from app.core.files import atomic_write

MAGIC = b"ROOFLINE-KV1\n"
SUFFIX = ".kv"
FOLDER = "kv-cache"
MAX_HEADER = 64 << 20  # a header is ~6 bytes a token: 64 MiB is ten million tokens
STALE_TMP_S = 600.0  # a half-written file this old belongs to an engine that died while writing it
_LEN = struct.Struct("<I")


class SavedKvError(Exception):
    """A saved state that cannot be used; the message says why, in words for the user."""


@dataclass(frozen=True)
class SavedHeader:
    key: dict[str, Any]
    tokens: list[int]
    state_bytes: int
    state_sha256: str
    prefill_ms_per_token: float | None  # measured where the state was made: the estimate of what it saves
    offset: int  # where the state bytes start in the file


def default_dir() -> Path:
    """The data folder's `kv-cache`, private to the user (the states hold the chats' contents, encoded)."""
    path = paths.data_dir() / FOLDER
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def model_identity(model_path: str) -> dict[str, Any]:
    """The model file as a state depends on it: a re-downloaded or re-quantized file differs in size or time."""
    real = os.path.realpath(model_path)
    st = os.stat(real)
    return {"model": real, "model_bytes": st.st_size, "model_mtime_ns": st.st_mtime_ns}


def file_for(folder: str | Path, conversation_id: str) -> Path:
    digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return Path(folder) / (digest + SUFFIX)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def key_mismatch(saved: dict[str, Any], current: dict[str, Any]) -> str | None:
    """None when the state fits the loaded model; otherwise which setting differs, in words."""
    names = {"model": "another model file", "model_bytes": "a different version of the model file",
             "model_mtime_ns": "a different version of the model file", "n_ctx": "context size",
             "type_k": "K cache type", "type_v": "V cache type", "flash_attn": "flash attention",
             "swa_full": "sliding-window cache layout", "llama_cpp": "llama-cpp-python version"}
    for field, words in names.items():
        if saved.get(field) != current.get(field):
            if field.startswith("model"):
                return f"it was made with {words}"
            return f"it was made with {words} {saved.get(field)!r}, the model is loaded with {current.get(field)!r}"
    return None


# ------------------------------------------------------------------ writing
def write_state(path: Path, key: dict[str, Any], tokens: list[int], state: memoryview | bytes,
                prefill_ms_per_token: float | None) -> int:
    """Write one conversation's state atomically (0600); returns the file's size."""
    header = json.dumps({
        "key": key, "tokens": [int(t) for t in tokens], "state_bytes": len(state),
        "state_sha256": hashlib.sha256(state).hexdigest(), "prefill_ms_per_token": prefill_ms_per_token,
        "saved_at": time.time(),
    }, separators=(",", ":")).encode()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # one temporary name per process: two engines may save the same chat at once
    atomic_write.write_chunks(path, (MAGIC + _LEN.pack(len(header)) + header, state), 0o600,
                              temp=path.with_name(f"{path.name}.tmp-{os.getpid()}"))
    return len(MAGIC) + _LEN.size + len(header) + len(state)


# ------------------------------------------------------------------ reading
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. It changes nothing for
# a regular file. Links are followed as a plain open does; what counts is the file opened.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_regular(path: Path) -> tuple[io.BufferedReader, int]:
    """The file opened for reading and its size, when it is a regular file; raises SavedKvError (a FIFO, a
    device, a folder) or OSError."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SavedKvError(f"it is not a regular file (a {_kind(st.st_mode)})")
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, words in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISDIR, "folder"), (stat.S_ISSOCK, "socket"),
                        (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device")):
        if test(mode):
            return words
    return "special file"


def read_header(path: Path) -> SavedHeader:
    """The header of a saved state, checked for shape and for the file's length; raises SavedKvError."""
    try:
        fh, size = _open_regular(path)
        with fh:
            return _parse_header(fh, size)
    except OSError as exc:
        raise SavedKvError(f"it could not be read ({exc.strerror or exc})") from exc


def _parse_header(fh: BinaryIO, size: int) -> SavedHeader:
    if fh.read(len(MAGIC)) != MAGIC:
        raise SavedKvError("it is not a saved KV file")
    raw_len = fh.read(_LEN.size)
    if len(raw_len) != _LEN.size:
        raise SavedKvError("it is cut short")
    (n,) = _LEN.unpack(raw_len)
    if n > MAX_HEADER or n > size:
        raise SavedKvError("its header is damaged")
    raw = fh.read(n)
    try:
        data = json.loads(raw)
        key, tokens = data["key"], data["tokens"]
        state_bytes, sha = int(data["state_bytes"]), str(data["state_sha256"])
        rate = data.get("prefill_ms_per_token")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise SavedKvError("its header is damaged") from exc
    if not isinstance(key, dict) or not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        raise SavedKvError("its header is damaged")
    offset = len(MAGIC) + _LEN.size + n
    if size != offset + state_bytes:
        raise SavedKvError("it is cut short" if size < offset + state_bytes else "it has bytes it should not")
    good_rate = float(rate) if isinstance(rate, (int, float)) and 0 < rate < 1e6 else None
    return SavedHeader(key, tokens, state_bytes, sha, good_rate, offset)


def read_state(path: Path, header: SavedHeader) -> bytearray:
    """The state bytes, checked against the header's checksum; raises SavedKvError. Touches the file (LRU)."""
    try:
        buf = bytearray(header.state_bytes)
        fh, _ = _open_regular(path)  # the header was read from a file: this may be another one by now
        with fh:
            fh.seek(header.offset)
            got = fh.readinto(buf)
    except OSError as exc:
        raise SavedKvError(f"it could not be read ({exc.strerror or exc})") from exc
    if got != header.state_bytes:
        raise SavedKvError("it is cut short")
    if hashlib.sha256(buf).hexdigest() != header.state_sha256:
        raise SavedKvError("it is damaged (checksum mismatch)")
    with contextlib.suppress(OSError):
        os.utime(path)  # used now: the last to be evicted
    return buf


def check_claims(state: bytes | bytearray | memoryview, tokens: list[int], n_ctx: int, n_vocab: int) -> None:
    """Raise SavedKvError unless llama.cpp's `state` holds exactly `tokens` (app.core.chat.llama_state)."""
    try:
        llama_state.check(state, tokens, n_ctx, n_vocab)
    except llama_state.StateError as exc:
        raise SavedKvError(str(exc)) from exc


# ------------------------------------------------------------------ the budget
def folder_bytes(folder: str | Path) -> int:
    return sum(size for _, size, _ in _files(Path(folder)))


def _files(folder: Path) -> list[tuple[Path, int, float]]:
    out = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(SUFFIX) or not entry.is_file(follow_symlinks=False):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        out.append((Path(entry.path), st.st_size, st.st_mtime))
    return out


def enforce_budget(folder: str | Path, budget_bytes: int, keep: Path | None = None) -> list[Path]:
    """Delete the least recently used states until the folder fits `budget_bytes` (and half-written files an
    engine left behind); `keep` (the state just written) goes last. Returns what was deleted."""
    folder = Path(folder)
    removed: list[Path] = []
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if ".tmp-" in entry.name and now - entry.stat(follow_symlinks=False).st_mtime > STALE_TMP_S:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    files = sorted(_files(folder), key=lambda f: (f[0] == keep, f[2]))
    total = sum(size for _, size, _ in files)
    for path, size, _ in files:
        if total <= budget_bytes:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed
