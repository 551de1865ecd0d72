"""llama.cpp's log lines in the engine process: the ground truth for buffer sizes, and the tail that error
reports quote; and the process's resident memory.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections import deque

import llama_cpp


# ------------------------------------------------------------------------------------------ llama.cpp logs
class LogCapture:
    """Collects llama.cpp's log lines (the ground truth for buffer sizes) and keeps a tail for errors."""

    BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|RS|compute|output)\s+buffer size\s*=\s*([\d.]+)\s*MiB")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._partial = ""
        self.tail: deque[str] = deque(maxlen=30)
        self.echo = os.environ.get("ROOFLINE_ENGINE_LOG") == "1"
        self.callback = llama_cpp.llama_log_callback(self._on_log)  # keep a reference: ctypes callback

    def _on_log(self, level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        self._partial += text.decode("utf-8", errors="replace")
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self.lines.append(line)
            self.tail.append(line)
            if self.echo or level in (2, 3):  # warnings and errors always reach stderr (the client keeps a tail)
                print(line, file=sys.stderr, flush=True)

    def install(self) -> None:
        llama_cpp.llama_log_set(self.callback, ctypes.c_void_p(0))

    def mark(self) -> int:
        return len(self.lines)

    def buffers_since(self, mark: int) -> dict[str, float]:
        """{"model:CPU_Mapped": 247.81, "KV:CPU": 72.0, "RS:CPU": 73.79, "compute:CPU": 514.5, ...} per kind:device
        (RS: the recurrent layers' state)."""
        out: dict[str, float] = {}
        for line in self.lines[mark:]:
            m = self.BUFFER_RE.search(line)
            if m:
                device, kind, mib = m.group(1), m.group(2), float(m.group(3))
                key = f"{kind}:{device}"
                out[key] = round(out.get(key, 0.0) + mib, 3)
        return out


def rss() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - psutil missing or restricted: report 0, never fail a generation
        return 0

