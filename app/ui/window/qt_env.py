"""Process-wide Qt settings the window needs before Qt starts: fewer threads beside llama.cpp.

Qt's raster painter splits large fills (antialiased polygons, image conversions) across a pool of helper
threads, one per CPU, and waits for them. Beside llama.cpp, which keeps every core busy while a reply
streams, that is the wrong trade: the helpers must preempt a llama.cpp thread to run (holding up its other
threads at the next barrier), and the GUI thread sleeps on a latch meanwhile. Measured with `scripts/bench_gui`
on 2 cores (docs/bench/2026-11-29-gui-streaming.md): a dashboard axis repaint took 4.4 ms with the pool and 1.5 ms
without it, and the window's share of decode speed rose ~1 % (0.971-0.980 -> 0.981-0.993× the engine alone).
QT_NO_GUI_THREADPOOL is Qt's own switch for this (read once, when the pool is first needed);
ROOFLINE_QT_THREADPOOL=1 keeps Qt's default.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def prepare(env: MutableMapping[str, str] | None = None) -> None:
    """Set Qt's environment for the desktop app; call before the QApplication is created."""
    env = os.environ if env is None else env
    if env.get("ROOFLINE_QT_THREADPOOL", "") != "1":
        env.setdefault("QT_NO_GUI_THREADPOOL", "1")
