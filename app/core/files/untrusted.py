"""Checks for values that come from outside: hub listings, model files, remote servers.

Whatever a hub, a GGUF file or an OpenAI-style server sends is checked here at the edge, before it becomes a
file name, a cache key, a size to allocate or text on a terminal:

- `sha256_hex` accepts exactly 64 hex digits (a hub's LFS oid) and nothing that could be a path.
- `cache_key` turns any tuple of untrusted strings into a fixed-length hex name, never a path of theirs.
- `read_capped` reads a response body up to a limit and says so when the body is longer.
- `clean_text` / `clean_line` strip terminal control and escape sequences from text before the CLI prints it,
  so a model name or a reply cannot retitle the terminal, clear the screen or overwrite a line with `\\r`.
  They also take out the invisible format characters that make text read otherwise than it is: bidi controls
  (U+202E before `fdp.exe` makes it read `exe.pdf`), zero-width characters and tag characters. `clean_text`
  (prose: replies, messages) removes them; `clean_line` (names, one line) shows them as `<U+202E>`, so two
  names that look alike can still be told apart.
- `windows_device_name` names the Windows device (CON, NUL, COM1, ...) a file name would open instead of a
  file: a name we create from outside text (a hub file, an export) must not be one.
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
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # and the Unicode line/paragraph separators
# Unicode format characters (category Cf) that change how text around them reads without showing anything:
# bidi embeddings/overrides/isolates/marks (U+061C, U+200E/F, U+202A-E, U+2066-9), zero-width space, joiners
# and word joiners, invisible operators, deprecated format controls, BOM, interlinear annotation, the format
# controls of Egyptian hieroglyphs, shorthand and music, and tag characters (invisible ASCII). Left alone: the
# visible "prepended concatenation marks" (U+0600-0605, U+06DD, U+070F, U+0890-1, U+08E2, U+110BD, U+110CD),
# which render as signs.
_JOINERS = "\u200c\u200d"  # ZWNJ/ZWJ: emoji sequences and Persian/Indic spelling need them in prose
_INVISIBLE_NOT_JOINERS = (
    "\u00ad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
)
_INVISIBLE_IN_TEXT = re.compile(f"[{_INVISIBLE_NOT_JOINERS}]")
_INVISIBLE_IN_LINE = re.compile(f"[{_INVISIBLE_NOT_JOINERS}{_JOINERS}]")
_DEVICE = re.compile(r"CON|PRN|AUX|NUL|CONIN\$|CONOUT\$|(?:COM|LPT)[0-9\u00b9\u00b2\u00b3]", re.IGNORECASE)


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
    """Text from outside, safe to print: escape sequences, control characters and invisible format characters
    (bidi controls, zero-width space, tags) removed; tab and newline kept, `\\r` removed so nothing can
    overwrite what was printed before."""
    out = _INVISIBLE_IN_TEXT.sub("", _CONTROL_KEEP_LINES.sub("", _ESCAPES.sub("", str(text))))
    return out if limit is None or len(out) <= limit else out[: max(0, limit - 1)] + "…"


def _shown(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def clean_line(text: object, limit: int | None = None) -> str:
    """`clean_text` for a value shown on one line (a name): newlines and tabs become spaces, and each
    invisible format character, joiners included, is shown as `<U+XXXX>` rather than hidden."""
    out = _INVISIBLE_IN_LINE.sub(_shown, _CONTROL_ALL.sub(" ", _ESCAPES.sub("", str(text))))
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


def has_invisible(text: str) -> bool:
    """Whether `text` holds a character `clean_line` would show escaped (a bidi control, a zero-width one)."""
    return _INVISIBLE_IN_LINE.search(text) is not None


def windows_device_name(name: str) -> str | None:
    """The Windows device a file name would open instead of a file (`CON.Q8_0.gguf`, `nul.md`, `Com1 .txt`,
    `AUX.` -> "CON", "NUL", ...), None for an ordinary name. One path component, not a path.

    Windows maps CON, PRN, AUX, NUL, COM0-9, LPT0-9 (also COM¹²³/LPT¹²³) and CONIN$/CONOUT$ to devices
    in any case, with any extension after them, and ignores trailing dots and spaces: writing "the file"
    would write to the console or a serial port, or silently nowhere. Checked on every system, since a
    library or an export made on Linux may be copied to Windows.
    """
    stem = name.rstrip(" .").split(".", 1)[0].rstrip(" ")
    return stem.upper() if _DEVICE.fullmatch(stem) else None
