"""The server's connections: a cap on how many are open, and a deadline for each request's headers.

uvicorn keeps a connection that never sends a byte open forever, and one that trickles its headers too
(its keep-alive timeout only runs between two requests, and any byte stops it), so idle sockets could use
up the process's file descriptors. `guarded_h11` is uvicorn's h11 protocol with two limits: past
`max_connections` open, a new connection is closed at once; and a request's headers must be complete
within `header_timeout_s` of the connection opening or of the last response ending, else the connection
is closed. The body's own deadline is the handler's (app.server.app).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class GuardedH11(H11Protocol):
    max_connections = 128
    header_timeout_s = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.abort()  # its file descriptor is freed now, not after a graceful close
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
        if waiting and not self.transport.is_closing():
            self.transport.close()


def guarded_h11(max_connections: int, header_timeout_s: float) -> type[H11Protocol]:
    """The protocol class for uvicorn's `http=` with these limits."""
    attrs: dict[str, Any] = {"max_connections": max_connections, "header_timeout_s": header_timeout_s}
    return type("GuardedH11Limited", (GuardedH11,), attrs)
