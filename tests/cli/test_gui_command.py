"""`roofline` with no display: the check of the display variables, and one line with exit code 2 instead of
Qt's abort."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.commands.gui import NO_DISPLAY_EXIT, display_problem

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]


def test_display_problem():
    assert display_problem({}, "linux") is not None
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "w"}, "linux") is not None
    assert display_problem({}, "darwin") is None and display_problem({}, "win32") is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="display variables are a Linux/X11 thing")
def test_no_display_one_line_and_exit_code_2(roofline_home):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run([str(Path(sys.executable).parent / "roofline")], check=False, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == NO_DISPLAY_EXIT
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "display" in lines[0] and "roofline --help" in lines[0], proc.stderr
    assert "Aborted" not in proc.stderr and "qt.qpa" not in proc.stderr
