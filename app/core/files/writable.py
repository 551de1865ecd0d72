"""Can a file be written into this folder? Answers in plain words with the real cause (a file standing
where a folder is needed, no permission, a read-only or virtual file system, no space), checked before
a long quantization or download starts rather than discovered at its end."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

SPACE_MARGIN = 64 * 1024 * 1024  # keep a little free: a full disk breaks more than this one file


class OutputPathError(Exception):
    """The output cannot go where it was asked to; the message says why in plain words."""


def _blocking_file(directory: Path) -> Path | None:
    """The nearest ancestor-or-self of `directory` that exists as something other than a folder."""
    for candidate in [directory, *directory.parents]:
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _reason(exc: OSError, directory: Path) -> str:
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {directory}"
    if code == errno.EROFS:
        return f"{directory} is on a read-only file system"
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"no space left in {directory}"
    if code == errno.ENOTDIR:
        return f"{directory} is not a folder"
    return f"cannot write in {directory}: {exc.strerror or exc}"


def ensure_writable_dir(directory: Path, needed: int = 0, what: str = "the output") -> None:
    """Create `directory` if needed and prove a file can be written there with `needed` bytes free;
    raise OutputPathError otherwise."""
    blocker = _blocking_file(directory)
    if blocker is not None:
        raise OutputPathError(f"cannot put {what} in {directory}: {blocker} is a file, not a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"cannot create the folder {directory}: {_reason(exc, directory)}") from None
    try:  # permissions alone do not tell (root, ACLs, read-only mounts, /proc): try it
        fd, probe = tempfile.mkstemp(prefix=".roofline-write-test-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputPathError(f"cannot write {what}: {_reason(exc, directory)}") from None
    if needed > 0:
        from app.core.metrics.phase import fmt_bytes

        free = shutil.disk_usage(directory).free
        if free < needed + SPACE_MARGIN:
            raise OutputPathError(f"not enough disk space in {directory}: {what} needs up to {fmt_bytes(needed)} "
                                  f"(+{fmt_bytes(SPACE_MARGIN)} margin), {fmt_bytes(free)} is free")
