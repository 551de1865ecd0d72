"""A remote server's GPU roofs as the user enters them in the Connect dialog, saved with that server.

No serving engine publishes its GPU's memory bandwidth or compute, so the remote roofline
(app.core.remote.roofline) needs them from the user: GB/s and TFLOP/s, typed as plain numbers, empty for
"not known". Placing the points also needs the model's parameters and the bytes of its weights, which only
llama-server's model list gives (`meta`); for vLLM, SGLang, TensorRT-LLM and Ollama they are entered too.
`parse_entry` turns one field's text into a number or one clear line (`RoofEntryError`); `RemoteServerRoofs`
is what settings.json keeps per server, keyed by `server_key(url)`. Pure Python.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

# Past these the number is a typo (or MB/s, GFLOP/s), not a machine: a whole node of today's fastest GPUs
# together reads well under 100 TB/s and computes well under 100 PFLOP/s dense.
MAX_BANDWIDTH_GBS = 100_000.0
MAX_TFLOPS = 100_000.0
MAX_PARAMS_B = 100_000.0  # billions: a hundred times the largest open models
MAX_WEIGHTS_GB = 1_000_000.0
# Bytes per parameter of any real format lie between ~1.5-bit quants (0.19) and FP32 (4): a pair far outside
# is a unit slip (MB for GB, millions for billions)
BYTES_PER_PARAM = (0.1, 8.0)


class RoofEntryError(ValueError):
    """One field's text is not a usable roof; the message is one line for the dialog."""


class RemoteServerRoofs(BaseModel):
    """One server's GPU as entered for it (None: not known)."""

    bandwidth_gbs: float | None = Field(default=None, gt=0, le=MAX_BANDWIDTH_GBS)
    peak_tflops: float | None = Field(default=None, gt=0, le=MAX_TFLOPS)
    params_b: float | None = Field(default=None, gt=0, le=MAX_PARAMS_B)  # the model's parameters, billions
    weights_gb: float | None = Field(default=None, gt=0, le=MAX_WEIGHTS_GB)  # the bytes of its weights, GB

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.bandwidth_gbs, self.peak_tflops, self.params_b, self.weights_gb))

    @property
    def n_params(self) -> int:
        """The entered parameter count (0: not entered), as P.Loaded counts it."""
        return round(self.params_b * 1e9) if self.params_b else 0

    @property
    def model_bytes(self) -> int:
        return round(self.weights_gb * 1e9) if self.weights_gb else 0

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


def parse_entry(text: str, what: str, unit: str, example: str, most: float,
                also: tuple[str, ...] = ()) -> float | None:
    """The number in `text` (None when empty), else RoofEntryError naming the field, the unit and a sample.
    The unit (or one of `also`) typed after the number ("3350 GB/s", "8B") is accepted; thousands separators
    are not (is "3,35" 3.35 or 335?), so a comma is refused with the example."""
    s = text.strip()
    for suffix in (unit, *also):
        if s.lower().endswith(suffix.lower()):
            s = s[: -len(suffix)].strip()
            break
    if not s:
        return None
    hint = f"enter a plain number such as {example} ({unit}), or leave it empty for unknown"
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


def parse_roofs(bandwidth_text: str, compute_text: str, params_text: str = "",
                weights_text: str = "") -> RemoteServerRoofs:
    """The dialog's fields; RoofEntryError for the first that is not usable, or a model size given by half or
    with a bytes-per-parameter no format has."""
    bandwidth = parse_entry(bandwidth_text, "GPU memory bandwidth", "GB/s", "3350", MAX_BANDWIDTH_GBS)
    compute = parse_entry(compute_text, "Peak compute", "TFLOP/s", "989", MAX_TFLOPS)
    params = parse_entry(params_text, "Model parameters", "billions", "8.03", MAX_PARAMS_B, also=("billion", "B"))
    weights = parse_entry(weights_text, "Model weights", "GB", "16.1", MAX_WEIGHTS_GB)
    if (params is None) != (weights is None):
        raise RoofEntryError("Model size: enter both its parameters (billions) and its weights (GB), or neither")
    if params and weights and not BYTES_PER_PARAM[0] <= weights / params <= BYTES_PER_PARAM[1]:
        raise RoofEntryError(f"Model size: {weights:g} GB for {params:g} billion parameters is "
                             f"{weights / params:.3g} bytes a parameter, which no format has; check the units")
    return RemoteServerRoofs(bandwidth_gbs=bandwidth, peak_tflops=compute, params_b=params, weights_gb=weights)
