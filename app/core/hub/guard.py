"""Limits a download keeps whatever the server does: never more bytes than the listing said, no empty
folders left behind when a download is refused or fails before its first byte, and no model file without a
sha256 to check it against unless the user allowed that (settings: allow_unverified_downloads).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from app.core.files import untrusted
from app.core.hub.files import UnverifiedDownload


class _File(Protocol):
    path: str
    sha256: str | None


def new_folders(folder: Path) -> list[Path]:
    """The folders from `folder` upwards that do not exist yet (deepest first): what a download would create."""
    missing = []
    for p in (folder, *folder.parents):
        if p.exists():
            break
        missing.append(p)
    return missing


def remove_empty(folders: list[Path]) -> None:
    """Remove those of `folders` (deepest first) that are empty; a folder holding anything stays."""
    for p in folders:
        try:
            os.rmdir(p)
        except FileNotFoundError:
            continue
        except OSError:
            return  # not empty (a kept .part): its parents are not empty either


def too_much(path: str, size: int) -> str:
    """The message for a body longer than its listing (the partial file is deleted)."""
    return (f"the hub sent more than the {size:,} bytes it listed for {untrusted.clean_line(path, 100)}: "
            "stopped and deleted the partial file (a broken or hostile server)")


def unverified_allowed() -> bool:
    """Settings' `allow_unverified_downloads` (off by default; env ROOFLINE_ALLOW_UNVERIFIED_DOWNLOADS)."""
    from app.core.config.settings import load_settings

    return bool(load_settings(move_aside=False).settings.allow_unverified_downloads)


def refuse_unverified(files: Sequence[_File]) -> None:
    """`UnverifiedDownload` when a file has no sha256 and unverified downloads are not allowed.

    Every file of a variant is a GGUF model that the engine will parse and run: without a hash there is
    nothing to tell the published file from one changed on the way or on a hostile hub. Called before any
    byte is fetched or any folder made.
    """
    missing = [f for f in files if not f.sha256]
    if not missing or unverified_allowed():
        return
    from app.core.config.settings import settings_path

    more = f" (and {len(missing) - 1} more file(s))" if len(missing) > 1 else ""
    raise UnverifiedDownload(
        f"refusing to download {untrusted.clean_line(missing[0].path, 100)}{more}: the hub gives no sha256 "
        f"for it, so the file could not be verified; to download it anyway, set "
        f"\"allow_unverified_downloads\": true in {settings_path()} "
        "(or ROOFLINE_ALLOW_UNVERIFIED_DOWNLOADS=1 for one run)")


def unverified_note(files: Sequence[_File]) -> str | None:
    """What to tell the user about files downloaded without a sha256 to check (None: all verified)."""
    names = [untrusted.clean_line(f.path, 100) for f in files if not f.sha256]
    if not names:
        return None
    more = f" and {len(names) - 1} more" if len(names) > 1 else ""
    return (f"not verified: the hub gives no sha256 for {names[0]}{more}, so nothing checked that its bytes "
            "are the ones published (allowed by allow_unverified_downloads)")
