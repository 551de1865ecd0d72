"""Where a remote server's own prefill and decode sit against that machine's roofs, not this one's.

The points are the local dashboard's arithmetic (a decode step: ≈ 2·params FLOPs for the weights read once;
prefill: a batch of prompt tokens sharing one read) fed with the server's per-request rates (ServerMeasures).
The roofs are the remote GPU's: its memory bandwidth and compute, as the user entered them for that server or
as the engine publishes them. Without a bandwidth there is no roof to draw against: `unknown` says so in one
line, and the caller must not fall back on the local machine's roofs. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.remote.measures import ServerMeasures

DEFAULT_BATCH = 512  # prompt tokens sharing one read of the weights (a micro-batch), when the server gives none


@dataclass(frozen=True)
class RemoteRoof:
    bandwidth: float | None  # bytes/s of the remote GPU
    peak_flops: float | None  # FLOP/s
    source: str  # "entered for this server", "published by the server"
    prefill: tuple[float, float] | None = None  # (FLOPs per byte, FLOP/s)
    decode: tuple[float, float] | None = None
    unknown: str = ""  # why nothing can be placed; "" when the roofs are known

    def roof(self, intensity: float) -> float | None:
        if not self.bandwidth:
            return None
        return min(self.bandwidth * intensity, self.peak_flops or float("inf"))


def remote_roofline(m: ServerMeasures | None, n_params: int, model_bytes: int, bandwidth: float | None,
                    peak_flops: float | None = None, source: str = "entered for this server",
                    batch: int = DEFAULT_BATCH) -> RemoteRoof:
    """The server's phases against the remote GPU's roofs; `unknown` set when they cannot be placed."""
    if not bandwidth or bandwidth <= 0:
        return RemoteRoof(None, None, source, unknown="the remote machine's roofline is unknown: enter its GPU's "
                          "memory bandwidth for this server")
    peak = peak_flops if peak_flops and peak_flops > 0 else None
    if m is None:
        return RemoteRoof(bandwidth, peak, source, unknown="the server has not reported its phases yet")
    fpt = 2.0 * n_params
    if fpt <= 0 or model_bytes <= 0:
        return RemoteRoof(bandwidth, peak, source, unknown="the remote model's size is unknown: enter its "
                          "parameters and weights for this server")
    base = fpt / model_bytes
    decode = (base, m.decode_tps * fpt) if m.decode_tps else None
    prefill = (base * max(batch, 1), m.prefill_tps * fpt) if m.prefill_tps else None
    why = "" if decode or prefill else "the server has reported no prefill or decode rate"
    return RemoteRoof(bandwidth, peak, source, prefill, decode, why)
