"""Write a file so that a reader, or the next start after a crash, sees either the old content or the new,
never half of it: the data goes to a temporary file in the same folder, which is then renamed over the
target (a rename within one file system is atomic on POSIX and Windows).

Every JSON or text store under the data, cache and config folders goes through here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DEFAULT_MODE = 0o666  # what open() uses: the umask takes bits away as for any other file


def temp_path(path: Path) -> Path:
    """The temporary name used while `path` is written (the same folder, so the rename stays atomic)."""
    return path.with_name(path.name + ".tmp")


def write_bytes(path: str | Path, data: bytes, mode: int = DEFAULT_MODE) -> Path:
    """Replace `path` with `data` atomically; `mode` applies to the new file (0o600 for private stores)."""
    return write_chunks(path, (data,), mode)


def write_chunks(path: str | Path, chunks: Iterable[bytes | memoryview], mode: int = DEFAULT_MODE,
                 temp: Path | None = None) -> Path:
    """Replace `path` with the chunks written one after the other, atomically: a large state is written
    without first being joined into one copy. `temp`: another temporary name in the same folder (when
    several processes may write the same file at once, each needs its own)."""
    path = Path(path)
    tmp = temp or temp_path(path)
    tmp.unlink(missing_ok=True)  # a leftover could carry other permissions
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str, mode: int = DEFAULT_MODE) -> Path:
    """Replace `path` with `text` (UTF-8) atomically."""
    return write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: str | Path, data: Any, mode: int = DEFAULT_MODE, *, default: Any = None,
               trailing_newline: bool = False) -> Path:
    """Replace `path` with `data` as indented JSON atomically."""
    text = json.dumps(data, indent=2, default=default)
    return write_text(path, text + "\n" if trailing_newline else text, mode)
