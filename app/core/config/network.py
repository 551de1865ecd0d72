"""Which hosts are this machine: plain http, and a server without an API key, are allowed only to them (the hub
client, the remote backend, `roofline serve` and the window's Serve switch share this one rule)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str | None) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1, bracketed or not)."""
    if not host:
        return False
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
