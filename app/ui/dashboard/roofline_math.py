"""Roofline arithmetic for the dashboard (no Qt): where prefill and decode sit against the machine's roofs.

A decode step multiplies one token through every weight: ≈ 2·params FLOPs for ≈ (model bytes + KV bytes)
read, so its arithmetic intensity is tiny and it sits on the bandwidth slope. Prefill pushes a batch of n
tokens through the same weights read once per micro-batch, so its intensity is ≈ n times higher and it
climbs toward the compute roof.

The CPU's roofs are app.core.predict.machine_roofs' for the loaded model and its threads: the same stored
measurement, and the same figures, as the Lab's batching roofline.
With the model's weights on a GPU the roofs are that device's: its measured matrix-vector bandwidth and matrix
multiply rate (app.core.predict.device_bandwidth, the same figures the speed model's GPU rates use).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.metrics.phase import PhaseMetrics

if TYPE_CHECKING:
    from app.core.predict.device_bandwidth import DeviceBandwidth
    from app.core.predict.machine_roofs import MachineRoofs


@dataclass
class Point:
    intensity: float  # FLOPs per byte read
    flops: float  # achieved FLOP/s


@dataclass
class Roofline:
    bandwidth: float | None  # bytes/s (the machine's or the device's roof); None: not measured yet
    peak_flops: float | None  # FLOP/s (the machine's or the device's roof, else the best prefill seen)
    prefill: Point | None
    decode: Point | None
    peak_source: str
    bandwidth_source: str = "not measured yet"

    def roof(self, intensity: float) -> float | None:
        """Attainable FLOP/s at this intensity: min(compute roof, bandwidth × intensity)."""
        if self.bandwidth is None and self.peak_flops is None:
            return None
        bw = self.bandwidth * intensity if self.bandwidth else float("inf")
        peak = self.peak_flops if self.peak_flops else float("inf")
        return min(bw, peak)

    @property
    def ridge(self) -> float | None:
        """Intensity where the two roofs meet: below it, memory bound; above it, compute bound."""
        if self.bandwidth and self.peak_flops:
            return self.peak_flops / self.bandwidth
        return None


@dataclass
class DeviceRoof:
    """A measured device's two roofs."""

    bandwidth: float  # bytes/s: its matrix-vector read bandwidth
    peak_flops: float  # FLOP/s: its F16 matrix multiply
    note: str


def device_roof(measured: DeviceBandwidth) -> DeviceRoof:
    return DeviceRoof(measured.read_gbs * 1e9, measured.gemm_gflops * 1e9,
                      f"measured on {measured.device}, {measured.measured_at[:10]}")


def weights_device(buffers_mib: dict[str, float]) -> str | None:
    """The device holding most of the model's weights (llama.cpp's "model:<device>" buffers), when it is not the
    CPU: "Vulkan0", "CUDA0"; None for a model in RAM."""
    model = {k.split(":", 1)[1]: v for k, v in buffers_mib.items() if k.startswith("model:")}
    if not model:
        return None
    device = max(model, key=lambda d: model[d])
    return None if device.upper().startswith("CPU") else device


def flops_per_token(n_params: int) -> float:
    return 2.0 * n_params


def operating_points(m: PhaseMetrics, n_params: int, model_bytes: int, n_ubatch: int = 512,
                     kv_bytes: int | None = None) -> tuple[Point | None, Point | None]:
    """(prefill, decode) points of one reply; None for a phase that did not run."""
    fpt = flops_per_token(n_params)
    kv = m.kv_bytes_used if kv_bytes is None else kv_bytes
    bytes_per_pass = float(model_bytes + max(kv, 0))
    if fpt <= 0 or bytes_per_pass <= 0:
        return None, None
    decode = Point(fpt / bytes_per_pass, m.decode_tps * fpt) if m.decode_tps > 0 else None
    prefill = None
    if m.prefill_tps > 0 and m.prefill_tokens > 0:
        # Weights are streamed once per micro-batch, so the batch that shares one read is ≤ n_ubatch.
        batch = min(m.prefill_tokens, max(n_ubatch, 1))
        prefill = Point(batch * fpt / bytes_per_pass, m.prefill_tps * fpt)
    return prefill, decode


def build(metrics: list[PhaseMetrics], n_params: int, model_bytes: int, machine: MachineRoofs | None,
          n_ubatch: int = 512, device: DeviceRoof | None = None) -> Roofline:
    """Roofline of the latest reply against the machine's roofs (`machine`), or on a measured GPU (`device`)
    that device's; without a compute roof, the best prefill FLOP/s seen stands in for one."""
    prefill = decode = None
    best_prefill = 0.0
    for m in metrics:
        p, d = operating_points(m, n_params, model_bytes, n_ubatch)
        if p is not None:
            best_prefill = max(best_prefill, p.flops)
            prefill = p
        if d is not None:
            decode = d
    bandwidth, bw_source, peak, source = None, "not measured yet", 0.0, ""
    if device is not None:
        bandwidth, bw_source, peak, source = device.bandwidth, device.note, device.peak_flops, device.note
    elif machine is not None and machine.bandwidth > 0:
        bandwidth, bw_source = machine.bandwidth, machine.note()
        peak, source = machine.peak_flops, machine.note()
    if peak <= 0 and best_prefill > 0:
        peak, source = best_prefill, "best prefill measured here"
    return Roofline(bandwidth, peak or None, prefill, decode, source or "not measured yet", bw_source)
