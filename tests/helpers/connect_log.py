"""Which hosts a piece of code tried to reach: every client library resolves an address through
`socket.getaddrinfo` before it connects, so recording those calls tells "no connection was attempted"
or "tried once, not in a retry loop" without timing anything."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def record_connect_attempts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Start recording; the returned list fills with (host, port) for each address looked up."""
    attempts: list[tuple[str, Any]] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append((host.decode() if isinstance(host, bytes) else str(host), port))
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts
