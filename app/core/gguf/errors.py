"""What the GGUF reader raises: `GGUFError` for bytes that are not a usable header (or hold values out of
range), `GGUFTruncated` for a prefix that stops inside the header (fetch `needed` bytes and ask again).
"""

from __future__ import annotations


class GGUFError(ValueError):
    """The bytes are not a usable GGUF header."""


class GGUFTruncated(GGUFError):
    """The prefix ends inside the header; `needed` bytes (a lower bound) are required to go on."""

    def __init__(self, needed: int):
        super().__init__(f"truncated header: need at least {needed} bytes")
        self.needed = needed
