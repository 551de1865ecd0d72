"""The server's side of the batch engine: starts `python -m app.engine.llama.batch` and relays its events.

No llama_cpp here. It is the single-request `EngineClient` with another process and two more event types:
starting and loading are blocking (`start_loaded`), after which every event goes to `on_event` on the
reader thread. A dead engine becomes one `Error(fatal=True)` event, as in EngineClient; the server fails
the requests in flight and calls `start_loaded` again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from app.engine import protocol as P
from app.engine.batch import messages as M
from app.engine.client import EngineClient


def batch_engine_command(parallel: int) -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "--batch-engine", "--parallel", str(parallel)]
    return [sys.executable, "-u", "-m", "app.engine.llama.batch", "--parallel", str(parallel)]


class BatchEngineClient(EngineClient):
    """EngineClient over the batch engine's process and messages; resource limits, exit reporting and the
    blocking helpers are EngineClient's own."""

    def __init__(self, parallel: int, env: dict[str, str] | None = None, nice: int = 0) -> None:
        super().__init__(on_event=None, env=env, nice=nice)
        self.parallel = parallel

    def command(self) -> list[str]:
        return batch_engine_command(self.parallel)

    def decode(self, raw: bytes) -> Any:
        return M.decode(raw)

    def start_loaded(self, config: P.LoadConfig, on_event: Callable[[Any], None],
                     timeout: float = 300.0) -> P.Loaded:
        """Start the process, load the model (blocking), then relay every event to `on_event`.

        Raises EngineError if the model does not load; the process is then closed."""
        self._on_event = None  # the blocking helpers read the queue while loading
        try:
            loaded = self.load(config, timeout)
        except Exception:
            self.close()
            raise
        self._on_event = on_event
        while not self._events.empty():  # whatever came between Loaded and now (stats)
            on_event(self._events.get_nowait())
        return loaded
