"""A remote server's GPU roofs as the user enters them in the Connect dialog, saved with that server.

No serving engine publishes its GPU's memory bandwidth or compute, so the remote roofline
(app.core.remote.roofline) needs them from the user: GB/s and TFLOP/s, typed as plain numbers, empty for
"not known". `parse_entry` turns one field's text into a number or one clear line (`RoofEntryError`);
`RemoteServerRoofs` is what settings.json keeps per server, keyed by `server_key(url)`. Pure Python.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

# Past these the number is a typo (or MB/s, GFLOP/s), not a machine: a whole node of today's fastest GPUs
# together reads well under 100 TB/s and computes well under 100 PFLOP/s dense.
MAX_BANDWIDTH_GBS = 100_000.0
MAX_TFLOPS = 100_000.0


class RoofEntryError(ValueError):
    """One field's text is not a usable roof; the message is one line for the dialog."""


class RemoteServerRoofs(BaseModel):
    """One server's GPU as entered for it (None: not known)."""

    bandwidth_gbs: float | None = Field(default=None, gt=0, le=MAX_BANDWIDTH_GBS)
    peak_tflops: float | None = Field(default=None, gt=0, le=MAX_TFLOPS)

    @property
    def empty(self) -> bool:
        return self.bandwidth_gbs is None and self.peak_tflops is None

    @property
    def bandwidth(self) -> float | None:
        """Bytes/s, as app.core.remote.roofline takes it."""
        return self.bandwidth_gbs * 1e9 if self.bandwidth_gbs else None

    @property
    def peak_flops(self) -> float | None:
        """FLOP/s."""
        return self.peak_tflops * 1e12 if self.peak_tflops else None


def server_key(url: str) -> str:
    """The key a server's entry is saved under: its URL as typed, less surrounding blanks and trailing '/'."""
    return url.strip().rstrip("/")


def parse_entry(text: str, what: str, unit: str, example: str, most: float) -> float | None:
    """The number in `text` (None when empty), else RoofEntryError naming the field, the unit and a sample.
    A unit typed after the number ("3350 GB/s") is accepted; thousands separators are not (is "3,35" 3.35 or
    335?), so a comma is refused with the example."""
    s = text.strip()
    if s.lower().endswith(unit.lower()):
        s = s[: -len(unit)].strip()
    if not s:
        return None
    hint = f"enter {unit} as a plain number such as {example}, or leave it empty for unknown"
    try:
        value = float(s)
    except ValueError:
        raise RoofEntryError(f"{what}: {text.strip()[:40]!r} is not a number; {hint}") from None
    if not math.isfinite(value) or value <= 0:
        raise RoofEntryError(f"{what} must be more than 0 {unit}; {hint}")
    if value > most:
        raise RoofEntryError(f"{what}: {value:,.0f} {unit} is more than any one server has (at most "
                             f"{most:,.0f}); {hint}")
    return value


def parse_roofs(bandwidth_text: str, compute_text: str) -> RemoteServerRoofs:
    """Both fields of the dialog; RoofEntryError for the first that is not usable."""
    return RemoteServerRoofs(
        bandwidth_gbs=parse_entry(bandwidth_text, "GPU memory bandwidth", "GB/s", "3350", MAX_BANDWIDTH_GBS),
        peak_tflops=parse_entry(compute_text, "Peak compute", "TFLOP/s", "989", MAX_TFLOPS))
