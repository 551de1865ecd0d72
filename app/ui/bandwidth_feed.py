"""Feeds the dashboard's roofline the machine's read bandwidth from app.core.bandwidth, off the GUI thread.

`request()` only reads the per-machine cache; `request(measure=True)` measures (about 2 s, all cores) when
there is no cached value: the window does that once, right after a model load while the engine is idle.
A request made while one is running is remembered (a measurement asked for is never lost) and run next.
"""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import QObject, Signal


class BandwidthFeed(QObject):
    _ready = Signal(object, str)  # bytes/s or None, note (from the worker thread, queued to the GUI thread)

    def __init__(self, dashboard: Any, parent: QObject | None = None):
        super().__init__(parent)
        self.dashboard = dashboard
        self.known = False
        self._busy = False
        self._measure_next = False
        self._ready.connect(self._on_ready)

    def request(self, measure: bool = False) -> None:
        if self._busy:
            self._measure_next = self._measure_next or measure
            return
        self._busy = True

        def work() -> None:
            value: float | None = None
            try:
                from app.core import bandwidth, hardware

                key = hardware.machine_key(hardware.probe_cpu(), hardware.probe_memory()[0])
                result = bandwidth.load_cached(key)
                if result is None and measure:
                    result = bandwidth.get_bandwidth(key)
                if result is not None:
                    value = result.read_gbs * 1e9
                    note = f"measured read bandwidth, {result.measured_at[:10]}"
                else:
                    note = "not measured yet"
            except Exception as exc:  # noqa: BLE001 (the roofline just lacks its slope)
                note = f"not measured ({exc})"
            try:
                self._ready.emit(value, note)
            except RuntimeError:  # window already gone
                pass

        threading.Thread(target=work, name="bandwidth", daemon=True).start()

    def _on_ready(self, value: float | None, note: str) -> None:
        self._busy = False
        self.known = value is not None
        self.dashboard.set_bandwidth(value, note)
        if value is None and self._measure_next:
            self._measure_next = False
            self.request(measure=True)
