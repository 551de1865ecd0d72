"""Helpers for scripts that drive the window headless (screenshots, GUI benchmark, soak); not part of the app.

Waiting runs a nested QEventLoop with a timer, never `processEvents()` in a loop: that keeps the real event
loop semantics (timers, queued signals) the app sees when a user drives it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from app.ui.window import qt_env


def offscreen_app() -> QApplication:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    qt_env.prepare()  # the window's own settings, so scripts measure what users run
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(["roofline"])
    return app


def spin(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def wait_until(condition: Callable[[], bool], timeout: float, step_ms: int = 20, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        spin(step_ms)
