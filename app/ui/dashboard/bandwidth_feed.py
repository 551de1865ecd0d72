"""Feeds the dashboard's roofline the machine's read bandwidth from app.core.predict.bandwidth, off the GUI thread,
and the measured GPU devices' roofs (app.core.predict.device_bandwidth) with it.

`request()` only reads the per-machine cache; `request(measure=True)` measures (about 2 s, all cores) when
there is no cached value: the window does that once, right after a model load while the engine is idle.
A request made while one is running is remembered (a measurement asked for is never lost) and run next.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject

from app.ui.toolkit.background import run_in_background


def read_bandwidth(measure: bool) -> tuple[float | None, str]:
    """The cached read bandwidth in bytes/s (measured first when `measure` and none is cached), and a note."""
    from app.core.predict import bandwidth, hardware

    key = hardware.machine_key(hardware.probe_cpu(), hardware.probe_memory()[0])
    result = bandwidth.load_cached(key)
    if result is None and measure:
        result = bandwidth.get_bandwidth(key)
    if result is None:
        return None, "not measured yet"
    return result.read_gbs * 1e9, f"measured read bandwidth, {result.measured_at[:10]}"


def read_device_roofs() -> dict[str, Any]:
    """The measured GPU devices' roofs (app.core.predict.device_bandwidth's cache), by llama.cpp's device name."""
    from app.core.predict import device_bandwidth, hardware
    from app.ui.dashboard.roofline_math import device_roof

    key = hardware.machine_key(hardware.probe_cpu(), hardware.probe_memory()[0])
    return {d.device: device_roof(d) for d in device_bandwidth.cached_devices(key)}


class BandwidthFeed(QObject):
    def __init__(self, dashboard: Any, parent: QObject | None = None):
        super().__init__(parent)
        self.dashboard = dashboard
        self.known = False
        self._busy = False
        self._measure_next = False

    def request(self, measure: bool = False) -> None:
        if self._busy:
            self._measure_next = self._measure_next or measure
            return
        self._busy = True
        run_in_background(self, lambda: (*read_bandwidth(measure), read_device_roofs()),
                          lambda found: self._on_ready(*found),
                          # the roofline just lacks its slope
                          lambda exc: self._on_ready(None, f"not measured ({exc})"), name="bandwidth")

    def _on_ready(self, value: float | None, note: str, roofs: dict[str, Any] | None = None) -> None:
        self._busy = False
        self.known = value is not None
        self.dashboard.set_bandwidth(value, note)
        if roofs:
            self.dashboard.set_device_roofs(roofs)
        if value is None and self._measure_next:
            self._measure_next = False
            self.request(measure=True)
