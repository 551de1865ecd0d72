"""A reply streaming into the window imports nothing new: a module imported on first use mid-reply is a
stall (numpy's `median` imports numpy.ma on its first call: 50 ms warm, over a second from a cold disk)."""

from __future__ import annotations

import os
import subprocess
import sys

# What the app has loaded before the first reply (its window), then one reply's worth of GUI work: tokens into
# a message (text, Markdown, a code block), live dashboard updates, the finished reply's numbers and plots.
SCRIPT = r"""
import sys, time
from PySide6.QtWidgets import QApplication
from app.ui.window import qt_env
qt_env.prepare()
qapp = QApplication([])
import app.ui.window.main_window  # noqa: F401 - everything the window imports at start
from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics
from app.ui.dashboard import Dashboard
from app.ui.engine_link.engine_qt import EngineQt
from app.ui.chat.message_view import MessageWidget

dash = Dashboard(EngineQt())
msg = MessageWidget(Message(1, 1, "assistant", "", "streaming", None, None, None, None, 0.0, 0.0))
dash.show(); msg.show(); qapp.processEvents()
before = set(sys.modules)

def pump(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        qapp.processEvents()
        time.sleep(0.01)

dash.start_reply()
t = time.monotonic()
for i, piece in enumerate(["Sure", ", here", " is **bold** and `code`", ":\n\n```python\n", "x = 1\n", "```\n",
                           "\n| a | b |\n|---|---|\n| 1 | 2 |\n", "Done."]):
    msg.append(piece)
    dash.on_tokens([t + 0.013 * (3 * i + k) for k in range(3)])
    pump(0.05)
pump(1.2)  # the live histogram's next redraw
itl = [13.0 + (i % 5) for i in range(23)]
dash.add_metrics(PhaseMetrics(prompt_tokens=20, prefill_tokens=20, prefill_ms=60.0, ttft_ms=80.0,
                              decode_tokens=23, decode_ms=sum(itl), generated_tokens=24, itl_ms=itl))
pump(0.5)  # the finished reply's plots
print("NEW:", sorted(set(sys.modules) - before))
"""


def test_a_reply_imports_no_module_on_first_use() -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    new = [line for line in out.stdout.splitlines() if line.startswith("NEW:")]
    assert new == ["NEW: []"], new
