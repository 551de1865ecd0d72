"""Who may talk to the server from a browser: the Host and Origin allowlists, and CORS for allowed origins.

A page on another site can make a browser send requests to a loopback server: through DNS rebinding (its
own name resolving to 127.0.0.1, so the browser sends `Host: evil.example`), or with a "simple" cross-origin
POST (text/plain, no preflight) whose reply it cannot read but whose work is done. So every request's Host
must be one of the names the server is reached by (loopback names, the --host it listens on, --allow-host),
and a request with an Origin header is refused unless that origin was allowed (--allow-origin; none by
default). Only allowed origins get CORS headers and preflight (OPTIONS) answers. A pure ASGI middleware:
a refusal is one OpenAI-shaped 403, before the route runs.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain"})
ALLOW_HEADERS = "authorization, content-type, x-api-key, openai-organization, openai-project"
PREFLIGHT_MAX_AGE_S = 600

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def host_name(header: str) -> str:
    """A Host header's name without its port, lower-case, without a trailing dot ('[::1]:80' → '::1')."""
    header = header.strip().lower()
    if header.startswith("["):
        name = header[1:header.find("]")] if "]" in header else header[1:]
    else:
        name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name.rstrip(".")


def origin_key(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


def machine_names() -> set[str]:
    """This machine's host name and every address of its interfaces: what a wildcard --host is reached by."""
    import socket

    import psutil

    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family in (socket.AF_INET, socket.AF_INET6):
                names.add(addr.address.split("%")[0].lower())
    return names


def is_wildcard(address: str) -> bool:
    """An "every interface" address (IPv4's or IPv6's unspecified one, or none given)."""
    if not address:
        return True
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:  # a name, not an address
        return False


def allowed_hosts(listen_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names served: loopback's, the listening address (a wildcard: this machine's names), `extra`."""
    names = set(LOOPBACK_NAMES) | {host_name(h) for h in extra}
    listen = host_name(listen_host)
    if is_wildcard(listen):
        names |= machine_names()
    else:
        names.add(listen)
    return frozenset(names)


class Guard:
    """ASGI middleware: refuses a foreign Host or an unlisted Origin, answers allowed origins' preflights."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], origins: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = frozenset(origin_key(o) for o in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if host is not None and host_name(host) not in self.hosts:
            await _refuse(send, f"The Host {host[:200]!r} is not served here (DNS rebinding?); start the server with "
                                "--allow-host NAME to allow it.", "host_not_allowed")
            return
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        if "*" not in self.origins and origin_key(origin) not in self.origins:
            await _refuse(send, f"Requests from the origin {origin[:200]!r} are not allowed; start the server with "
                                "--allow-origin ORIGIN to allow it.", "origin_not_allowed")
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await _preflight(send, origin)
            return

        async def with_cors(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_cors(origin)]
            await send(message)

        await self.app(scope, receive, with_cors)


def _cors(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


async def _preflight(send: Send, origin: str) -> None:
    headers = [*_cors(origin), (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
               (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
               (b"access-control-max-age", str(PREFLIGHT_MAX_AGE_S).encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, message: str, code: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
