"""`roofline chat --remote`'s view of the server's own numbers: one poll of its metrics when the chat
connects and one when the reply ends, each on its own thread (app.engine.remote.server_metrics). The first is
the baseline the reply is measured against, so the request waits for it (at most its timeout): a baseline
taken after the reply would hold the reply too and show it as nothing. A poll that has not answered by then is
left out, not used late. After the reply each poll is waited for at most twice its timeout (a poll stops
itself after one), then the summary goes without it."""

from __future__ import annotations

import threading
from typing import Any

from app.core.remote.measures import ServerMeasures


class ServerSide:
    def __init__(self, client: Any, engine: str | None = None, timeout: float | None = None) -> None:
        from app.engine.remote.server_metrics import DEFAULT_TIMEOUT_S, MetricsSource, MetricsUnavailable

        self._unavailable = MetricsUnavailable
        self.timeout = timeout or DEFAULT_TIMEOUT_S
        self.error: str | None = None
        self.measures: ServerMeasures | None = None
        try:
            self.source: Any = MetricsSource(client, engine, self.timeout)
        except MetricsUnavailable as exc:
            self.source, self.error = None, str(exc)
        self._thread = self._poll_on_thread()
        self._late = False

    def before_request(self) -> None:
        """Wait (at most the poll's timeout) for the baseline poll, before the reply's request goes out."""
        if self._thread is None:
            return
        self._thread.join(self.timeout)
        self._late = self._thread.is_alive()

    def _poll_on_thread(self) -> threading.Thread | None:
        if self.source is None:
            return None

        def poll() -> None:
            try:
                self.measures = self.source.poll()
                self.error = None
            except self._unavailable as exc:
                self.error = str(exc)

        thread = threading.Thread(target=poll, name="server-metrics", daemon=True)
        thread.start()
        return thread

    def finish(self) -> ServerMeasures | None:
        """The measures over the reply (the second poll against the first), or None with `error` set."""
        if self._thread is None:
            return None
        # a poll ends itself after its timeout with its own error: the join waits past that (a backstop), since a
        # join of the same length could end a moment first and report the wrong reason (a busy test run did)
        self._thread.join(2 * self.timeout)
        if self._thread.is_alive():
            self.error = "the server's metrics did not come in time: left out"
            return None
        if self._late and self.error is None:  # a baseline from after the request would hide the reply
            self.error = "the server's metrics came only after the request went out: left out"
            return None
        if self.error is not None:  # the first poll failed: a second would fail alike
            return None
        self._thread = self._poll_on_thread()
        if self._thread is not None:
            self._thread.join(2 * self.timeout)  # a poll stops itself after its timeout; this is a backstop
            if self._thread.is_alive():
                self.error = "the server's metrics did not come in time: left out"
                return None
        return self.measures if self.error is None else None
