"""The connection limits (app.server.connections) on the real application without a model: a connection
that sends nothing, or trickles its headers, is closed after the header deadline; past the cap a new
connection is closed at once; and an ordinary request is served all along."""

from __future__ import annotations

import socket
import time

from app_server import app_server
from reliability_plugin import record


def closed_by_server(sock: socket.socket, timeout: float = 30.0) -> bool:
    """True when the server closes `sock` (EOF or reset) within `timeout`; False if it is still open."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_and_trickling_connections_are_closed_after_the_header_deadline() -> None:
    with app_server(header_timeout_s=0.5) as srv:
        idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(5)]
        trickle = socket.create_connection(("127.0.0.1", srv.port))
        start = time.monotonic()
        for byte in b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ":
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                break  # closed by the server mid-trickle
            time.sleep(0.05)
            if time.monotonic() - start > 20:
                break
        assert closed_by_server(trickle)
        assert all(closed_by_server(s) for s in idle)
        record("hostile inputs refused", len(idle) + 1)
        assert srv.request("GET", "/health")[0] == 200  # a request that sends its headers is served
        for s in [*idle, trickle]:
            s.close()


def test_connections_past_the_cap_are_closed_at_once() -> None:
    with app_server(max_connections=3, header_timeout_s=600) as srv:
        held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(3)]
        time.sleep(0.2)  # let the server accept them
        extra = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(5)]
        assert all(closed_by_server(s) for s in extra)
        record("hostile inputs refused", len(extra))
        assert not any(closed_by_server(s, timeout=0.2) for s in held)  # those within the cap stay open
        for s in held:
            s.close()
        time.sleep(0.2)
        assert srv.request("GET", "/health")[0] == 200  # room again once they are gone
        for s in extra:
            s.close()
