"""Where llama.cpp's own llama-server is, for the live tests that run it: $ROOFLINE_LLAMA_SERVER (what .ci/run
exports after building it), else the newest one scripts/_llama_tools.sh cached under
~/.cache/roofline-build/llama-tools-*/bin, else one on PATH. Building it (tens of minutes) is that script's job,
never a test's: without one the test skips, or fails where ROOFLINE_REQUIRE_LLAMA_SERVER=1 (.ci/run sets it, as
it builds llama-server first: a missing one there is a broken build, not a machine without the tool)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "scripts" / "_llama_tools.sh"
REQUIRE = "ROOFLINE_REQUIRE_LLAMA_SERVER"
GIVEN = "ROOFLINE_LLAMA_SERVER"


def llama_server_bin() -> Path | None:
    """The llama-server to run, or None when there is none."""
    given = os.environ.get(GIVEN)
    if given:
        path = Path(given)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "roofline-build"
    found = sorted(cache.glob("llama-tools-*/bin/llama-server"), key=lambda p: p.stat().st_mtime)
    if found:
        return found[-1]
    on_path = shutil.which("llama-server")
    return Path(on_path) if on_path else None


def require_llama_server() -> Path:
    """The llama-server to run; a skip without one, a failure when ROOFLINE_REQUIRE_LLAMA_SERVER=1."""
    binary = llama_server_bin()
    if binary is not None:
        return binary
    given = os.environ.get(GIVEN)
    why = (f"llama-server is not at {GIVEN}={given}" if given else
           f"llama-server is not built (run scripts/{TOOLS.name})")
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{why}, and {REQUIRE}=1 requires it", pytrace=False)
    pytest.skip(why)
