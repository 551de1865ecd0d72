"""Feeds the dashboard's roofline the machine's roofs for the loaded model (app.core.predict.machine_roofs: the
one stored measurement the Lab and Discover read too), off the GUI thread, and the measured GPU devices' roofs
(app.core.predict.device_bandwidth) with them.

`request()` only reads what is stored; `request(loaded, measure=True)` measures (about 2 s, all cores) when
nothing is stored yet: the window does that once, right after a model load while the engine is idle. A
request made while one is running is remembered (the latest model; a measurement asked for is never lost)
and run next.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QObject

from app.ui.toolkit.background import run_in_background


def read_roofs(model_path: str | None, threads: int, measure: bool) -> tuple[Any, bool]:
    """(the model's MachineRoofs, or None without a local model file; whether a measurement is stored)."""
    from app.core.predict import bandwidth, hardware, machine_roofs

    key = hardware.machine_key(hardware.probe_cpu(), hardware.probe_memory()[0])
    stored = bandwidth.load_cached(key) is not None
    if not model_path or not os.path.isfile(model_path):  # a remote model: its roofs are its server's
        return None, stored
    roofs = machine_roofs.roofs_for_model(model_path, threads or None, measure=measure and not stored)
    return roofs, bool(roofs.measured_at)


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
        self.known = False  # a measurement is stored
        self._busy = False
        self._next: tuple[Any, bool] | None = None  # (loaded, measure) asked for while one ran

    def request(self, loaded: Any = None, measure: bool = False) -> None:
        """Read the roofs for `loaded` (a protocol.Loaded; None: only whether a measurement is stored)."""
        if self._busy:
            queued, queued_measure = self._next or (None, False)
            self._next = (loaded if loaded is not None else queued, measure or queued_measure)
            return
        self._busy = True
        path = getattr(loaded, "model_path", None)
        threads = int(getattr(loaded, "n_threads", 0) or 0)
        run_in_background(self, lambda: (*read_roofs(path, threads, measure), read_device_roofs()),
                          lambda found: self._on_ready(*found),
                          # the roofline just lacks its roofs
                          lambda exc: self._on_ready(None, self.known), name="bandwidth")

    def _on_ready(self, roofs: Any, stored: bool, devices: dict[str, Any] | None = None) -> None:
        self._busy = False
        self.known = stored
        if roofs is not None or self._next is None:
            self.dashboard.set_machine_roofs(roofs)
        if devices:
            self.dashboard.set_device_roofs(devices)
        if self._next is not None:
            loaded, measure = self._next
            self._next = None
            self.request(loaded, measure)
