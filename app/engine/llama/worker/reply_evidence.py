"""The engine's side of "why is it slow?": snapshots of the machine when a request arrives and when its reply
ends (`app.core.metrics.evidence`), with the load's GPU facts, put in Done.metrics["evidence"].

The list of every process's CPU time (to name the busiest other one) takes a few ms per hundred processes,
so the first one is read on a thread while the prompt is evaluated, not before it.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from app.core.metrics import evidence as E

if TYPE_CHECKING:
    from app.engine.llama.worker.engine import Engine


class ReplyEvidence:
    def __init__(self) -> None:
        self.before = E.take_snapshot(processes=False)
        self._thread = threading.Thread(target=self._read_processes, daemon=True, name="evidence")
        self._thread.start()

    def _read_processes(self) -> None:
        try:
            self.before.processes = E.process_times(os.getpid())
        except Exception:  # noqa: BLE001 - evidence is best effort: a reply never fails for it
            self.before.processes = {}

    def finish(self, engine: Engine) -> dict[str, Any]:
        self._thread.join(timeout=1.0)
        after = E.take_snapshot()
        loaded = engine.loaded
        ev = E.between(self.before, after, threads=loaded.n_threads if loaded else 0)
        if loaded is not None:
            ev.gpu_layers_planned = loaded.gpu_layers_requested  # as asked: a build may place fewer
            ev.model_bytes = loaded.model_size
        offloaded = E.offloaded_layers(engine.log.lines)
        if offloaded is not None:
            ev.gpu_layers_offloaded, ev.gpu_layers_total = offloaded
        try:
            ev.gpu_free_share = E.gpu_free_share(engine.stats().devices)
        except Exception:  # noqa: BLE001 - a device query that fails leaves that reading out
            pass
        return ev.to_dict()
