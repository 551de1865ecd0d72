"""A window of scrapes of one server: each new scrape measured against the oldest one of the last minute,
and the gauges kept as a series for the dashboard's Server view (running and waiting requests, KV usage).

The first scrape has no earlier one: it is measured since the server started. Pure Python: the poller (a
thread in the CLI, background work in the window) hands in each Exposition as it reads it.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from app.core.remote.engines import EngineSpec
from app.core.remote.exposition import Exposition
from app.core.remote.measures import ServerMeasures, measure

WINDOW_S = 60.0  # histograms and counters are read over the last minute
HISTORY_POINTS = 600  # gauge points kept (ten minutes at one scrape a second)


@dataclass(frozen=True)
class Point:
    t: float
    running: int | None
    waiting: int | None
    kv_fraction: float | None
    generation_tps: float | None


class ServerWatch:
    def __init__(self, spec: EngineSpec, window_s: float = WINDOW_S) -> None:
        self.spec = spec
        self.window_s = window_s
        self._scrapes: collections.deque[Exposition] = collections.deque()
        self.history: collections.deque[Point] = collections.deque(maxlen=HISTORY_POINTS)
        self.last: ServerMeasures | None = None

    def add(self, scrape: Exposition) -> ServerMeasures:
        """The measures of `scrape` over the last minute (since the server started, for the first one)."""
        if self._scrapes and scrape.t <= self._scrapes[-1].t:
            self._scrapes.clear()  # a clock that went back: start the window again
        # keep the newest scrape at least a window old, so the window is a full minute once there is one
        while len(self._scrapes) > 1 and scrape.t - self._scrapes[1].t >= self.window_s:
            self._scrapes.popleft()
        before = self._scrapes[0] if self._scrapes else None
        self._scrapes.append(scrape)
        self.last = measure(self.spec, scrape, before)
        self.history.append(Point(scrape.t, self.last.running, self.last.waiting, self.last.kv_fraction,
                                  self.last.generation_tps_total))
        return self.last
