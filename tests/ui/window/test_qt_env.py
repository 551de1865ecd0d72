"""app.ui.window.qt_env: the window turns off Qt's painting helper threads, which compete with llama.cpp for cores."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.ui.window import qt_env

# Paints large antialiased polygons (fills Qt splits across its helper pool), then lists this process's threads.
PAINT_AND_LIST_THREADS = """
import glob
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor, QImage, QPainter, QPolygonF
from PySide6.QtWidgets import QApplication
from app.ui.window import qt_env
if PREPARE:
    qt_env.prepare()
app = QApplication([])
img = QImage(800, 600, QImage.Format.Format_ARGB32_Premultiplied)
p = QPainter(img)
p.setRenderHint(QPainter.RenderHint.Antialiasing)
p.setBrush(QColor(10, 20, 200, 128))
for _ in range(5):
    p.drawPolygon(QPolygonF([QPointF(0, 0), QPointF(800, 10), QPointF(790, 600), QPointF(5, 590)]))
p.end()
print(sum("pooled" in open(f).read() for f in glob.glob("/proc/self/task/*/comm")))
"""


def test_prepare_turns_the_pool_off_unless_asked_to_keep_it() -> None:
    env: dict[str, str] = {}
    qt_env.prepare(env)
    assert env == {"QT_NO_GUI_THREADPOOL": "1"}
    env = {"ROOFLINE_QT_THREADPOOL": "1"}
    qt_env.prepare(env)
    assert "QT_NO_GUI_THREADPOOL" not in env
    env = {"QT_NO_GUI_THREADPOOL": "yes"}  # the user's own value stands
    qt_env.prepare(env)
    assert env == {"QT_NO_GUI_THREADPOOL": "yes"}


def _pooled_threads(prepare: bool) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("QT_NO_GUI_THREADPOOL", "ROOFLINE_QT_THREADPOOL")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    out = subprocess.run([sys.executable, "-c", f"PREPARE = {prepare}\n" + PAINT_AND_LIST_THREADS], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads through /proc")
def test_the_window_paints_without_qt_helper_threads() -> None:
    assert _pooled_threads(prepare=True) == 0
    if (os.cpu_count() or 1) >= 2:  # Qt only splits fills where it sees several CPUs: then the switch matters
        assert _pooled_threads(prepare=False) > 0
