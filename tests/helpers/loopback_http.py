"""The fake HTTP servers' one way to run: a threaded server on a free loopback port, its handler reading the
fake's state at `self.server.state`, shut down and joined when the block ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], state: Any) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.state = state


@contextmanager
def serve_on_loopback(handler: type[BaseHTTPRequestHandler], state: Any) -> Iterator[str]:
    """The server's base URL ("http://127.0.0.1:PORT") while the block runs."""
    server = LoopbackServer(handler, state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
