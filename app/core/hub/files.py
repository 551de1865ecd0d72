"""Where a download goes and what it leaves on disk: hub file names checked before they become paths (no `..`,
absolute paths, control or invisible format characters, Windows device names, or names longer than
filesystems allow), the `.part`, `.part.json` sidecar and `.roofline.json` provenance beside each model, and
the errors downloads raise.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from app.core.files import atomic_write, untrusted

SIDECAR_SUFFIX = ".part.json"
PROVENANCE_SUFFIX = ".roofline.json"
MAX_NAME_BYTES = 200  # one file or folder name
MAX_PATH_BYTES = 1000  # a whole path in a repo


class DownloadError(Exception):
    """A download failed; `str(err)` is a message for the user."""


class UnsafeFilename(DownloadError):
    pass


class InsufficientDisk(DownloadError):
    pass


class ChecksumMismatch(DownloadError):
    pass


class UnverifiedDownload(DownloadError):
    """The hub gives no sha256 for a model file, and settings do not allow unverified downloads."""


class DownloadStopped(DownloadError):
    """Paused or cancelled on request (not a failure)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason  # "paused" | "cancelled"


_BAD_CHARS = re.compile(r"[\x00-\x1f\\:*?\"<>|]")


def safe_relpath(name: str) -> PurePosixPath:
    """A hub file path we can place under our models directory, or `UnsafeFilename`.

    Refuses `..`, absolute paths, backslashes, drive letters, control characters, invisible format characters
    (a bidi override makes the name read otherwise) and Windows device names (on Windows `CON.Q8_0.gguf` is
    the console, not a file) rather than "cleaning" them: a hub that sends such a name is not one to trust
    with a guess.
    """
    shown = untrusted.clean_line(name, 100)
    if not name or name.startswith("/") or _BAD_CHARS.search(name) or untrusted.has_invisible(name):
        raise UnsafeFilename(f"refusing unsafe file name from the hub: {shown!r}")
    parts = PurePosixPath(name).parts
    if not parts or any(p in ("..", ".", "") or p.startswith(".") for p in parts) or len(parts) > 8:
        raise UnsafeFilename(f"refusing unsafe file name from the hub: {shown!r}")
    device = next((d for p in parts if (d := untrusted.windows_device_name(p))), None)
    if device:
        raise UnsafeFilename(f"refusing a file name from the hub that is the Windows device {device}: "
                             f"{shown!r}")
    # Filesystems allow 255 bytes a name; leave room for our ".part.json" and ".roofline.json" suffixes.
    if any(len(p.encode()) > MAX_NAME_BYTES for p in parts) or len(name.encode()) > MAX_PATH_BYTES:
        raise UnsafeFilename(f"refusing a file name from the hub longer than {MAX_NAME_BYTES} bytes a part "
                             f"({len(name.encode())} bytes in all): {shown!r}")
    return PurePosixPath(*parts)


def destination(models_dir: Path, repo_id: str, path_in_repo: str) -> Path:
    """models/<owner>/<repo>/<path in repo>, checked to stay inside models/."""
    owner, _, name = repo_id.partition("/")
    rel = safe_relpath(owner) / safe_relpath(name) / safe_relpath(path_in_repo)
    dest = (models_dir / rel).resolve()
    root = models_dir.resolve()
    if root not in dest.parents:
        raise UnsafeFilename(f"refusing a download outside the models directory: {path_in_repo!r}")
    return dest


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def sidecar_path(dest: Path) -> Path:
    return dest.with_name(dest.name + SIDECAR_SUFFIX)


def provenance_path(model: Path) -> Path:
    return model.with_name(model.name + PROVENANCE_SUFFIX)


def write_provenance(model: Path, data: dict[str, Any]) -> None:
    atomic_write.write_json(provenance_path(model), data, default=str)


