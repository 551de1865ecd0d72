"""One colour per phase everywhere (prefill orange, decode blue, roofs grey): the charts here and every
widget of the window (app.ui.toolkit.theme re-exports them)."""

from __future__ import annotations

PREFILL = "#e8710a"  # orange: prompt processing (compute-bound)
DECODE = "#1a73e8"  # blue: token generation (memory-bound)
ROOF = "#7f8c8d"
