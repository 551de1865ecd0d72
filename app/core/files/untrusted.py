"""Checks for values that come from outside: hub listings, model files, remote servers.

Whatever a hub, a GGUF file or an OpenAI-style server sends is checked here at the edge, before it becomes a
file name, a cache key, a size to allocate or text on a terminal:

- `sha256_hex` accepts exactly 64 hex digits (a hub's LFS oid) and nothing that could be a path.
- `cache_key` turns any tuple of untrusted strings into a fixed-length hex name, never a path of theirs.
- `read_capped` reads a response body up to a limit and says so when the body is longer.
- `clean_text` / `clean_line` strip terminal control and escape sequences from text before the CLI prints it,
  so a model name or a reply cannot retitle the terminal, clear the screen or overwrite a line with `\\r`.
- `whole_number` / `finite_number` accept a number from a server's JSON only when it is one we can print and
  compute with (not a list, string, boolean, NaN, infinity, negative, or past a bound); `shown` names the
  value that was not, in a short line.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Protocol

_SHA256 = re.compile(r"[0-9a-f]{64}")

# ESC-introduced sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ST`, DCS/PM/APC/SOS strings, and
# two-character escapes), then any remaining C0/C1 control character and DEL.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, screen clears
    r"|\x1b[\]PX^_].*?(?:\x07|\x1b\\|\x9c|$)"  # OSC (window title, hyperlinks), DCS, SOS, PM, APC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x9d\x90\x98\x9e\x9f].*?(?:\x07|\x1b\\|\x9c|$)"  # 8-bit OSC/DCS/SOS/PM/APC
    r"|\x1b[ -/]*[0-~]?",  # other escapes (charset switches, resets), or a lone ESC
    re.DOTALL,
)
_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # keeps \t and \n
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class TooLarge(ValueError):
    """A body or value from outside is larger than the limit set for it."""


def sha256_hex(value: object) -> str | None:
    """A sha256 as 64 lowercase hex digits, None when absent; anything else raises ValueError."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"not a sha256: {type(value).__name__}")
    text = value.strip().lower()
    if not _SHA256.fullmatch(text):
        raise ValueError(f"not a sha256: {clean_line(value, 80)!r}")
    return text


def cache_key(*parts: object) -> str:
    """A file name (64 hex digits) for a cache entry identified by untrusted strings."""
    digest = hashlib.sha256()
    for part in parts:
        raw = str(part).encode("utf-8", "surrogatepass")
        digest.update(len(raw).to_bytes(8, "little") + raw)  # length-prefixed: ("ab","c") != ("a","bc")
    return digest.hexdigest()


class _Readable(Protocol):
    def read(self, amt: int) -> bytes: ...


def read_capped(stream: _Readable, limit: int, what: str) -> bytes:
    """Up to `limit` bytes of `stream`; `TooLarge` (naming `what`) when it holds more."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        block = stream.read(min(1 << 16, limit + 1 - size))
        if not block:
            return b"".join(chunks)
        chunks.append(block)
        size += len(block)
    raise TooLarge(f"{what} is larger than {limit:,} bytes: stopped reading")


def clean_text(text: object, limit: int | None = None) -> str:
    """Text from outside, safe to print: escape sequences and control characters removed (tab and newline
    kept; `\\r` removed so nothing can overwrite what was printed before)."""
    out = _CONTROL_KEEP_LINES.sub("", _ESCAPES.sub("", str(text)))
    return out if limit is None or len(out) <= limit else out[: max(0, limit - 1)] + "…"


def clean_line(text: object, limit: int | None = None) -> str:
    """`clean_text` for a value shown on one line: newlines and tabs become spaces too."""
    out = _CONTROL_ALL.sub(" ", _ESCAPES.sub("", str(text)))
    return out if limit is None or len(out) <= limit else out[: max(0, limit - 1)] + "…"


def whole_number(value: object, limit: int) -> int | None:
    """A count from a server's JSON: a whole number in 0..`limit` (3.0 reads as 3), None for anything else
    (a list, a string, a boolean, a fraction, a negative number, NaN, infinity - json reads 1e400 as inf)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():  # NaN and infinity are not integers either
        return None
    return int(value) if 0 <= value <= limit else None


def finite_number(value: object, limit: float) -> float | None:
    """A measurement from a server's JSON: a number in 0..`limit`, None for anything else (see whole_number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and not 0 <= value <= limit:  # before float(): 10**400 overflows it
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 <= number <= limit else None


def shown(value: object, limit: int = 40) -> str:
    """A value from outside as it was sent (JSON spelling: `Infinity`, `true`, `"5"`), short and on one line."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return clean_line(text[: limit * 4], limit)  # ensure_ascii: bidi and other controls show as \uXXXX
