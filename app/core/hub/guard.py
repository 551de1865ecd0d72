"""Limits a download keeps whatever the server does: never more bytes than the listing said, and no empty
folders left behind when a download is refused or fails before its first byte.
"""

from __future__ import annotations

import os
from pathlib import Path


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
    from app.core.files import untrusted

    return (f"the hub sent more than the {size:,} bytes it listed for {untrusted.clean_line(path, 100)}: "
            "stopped and deleted the partial file (a broken or hostile server)")
