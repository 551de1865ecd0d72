"""A free name beside a file, for keeping a damaged or unusable file instead of deleting it."""

from __future__ import annotations

import time
from pathlib import Path


def aside_name(path: Path, label: str) -> Path:
    """`<name>.<label>-<time>`, with `-1`, `-2`... added when that name is taken (two in one second)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
        n += 1
    return backup
