"""The batching sweep on the roofline: each stream count as an operating point (arithmetic intensity, FLOP/s).

A decode step of B sequences reads every weight once plus B KV caches and does B tokens' arithmetic, so its
intensity (FLOPs per byte) grows about linearly with B (app.core.predict.batching): the point moves right. Its height
is tokens/s × FLOPs per token — the measured aggregate rate for the measured point, the predicted one beside
it. The roofs are this machine's, from its one stored measurement (app.core.predict.machine_roofs, which the
dashboard's roofline draws too): the effective memory bandwidth (the slope) and the compute roof, the rate of
llama.cpp's kernels at the width where they run fastest (the ceiling the batch prediction approaches). Where the
slope meets the roof, batching stops paying.
Pure Python: the Lab page draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.gguf.info import GGUFInfo
from app.core.predict.bandwidth import BandwidthResult
from app.core.predict.batching import BatchPoint
from app.core.predict.machine_roofs import roofs
from app.core.predict.memory import MemoryConfig
from app.core.predict.speed import Rates, decode_flops


@dataclass(frozen=True)
class RoofPoint:
    streams: int
    intensity: float  # FLOPs per byte of one step
    predicted_flops: float  # FLOP/s at the predicted aggregate rate
    measured_flops: float | None  # FLOP/s at the measured one (None: not measured)


@dataclass(frozen=True)
class BatchRoofline:
    bandwidth: float  # bytes/s: the slope
    peak_flops: float  # FLOP/s: the compute roof
    flops_per_token: float
    points: list[RoofPoint]
    note: str = ""  # where the roofs come from: the measurement's date, whether busy (MachineRoofs.note)

    def roof(self, intensity: float) -> float:
        return min(self.peak_flops, self.bandwidth * intensity)

    @property
    def ridge(self) -> float:
        """The intensity where the slope meets the compute roof."""
        return self.peak_flops / self.bandwidth if self.bandwidth else 0.0


def batch_roofline(info: GGUFInfo, rates: Rates, predicted: list[BatchPoint],
                   measured: dict[int, float] | None = None,
                   measurement: BandwidthResult | None = None) -> BatchRoofline:
    """Roofs and points for `predicted` (app.core.predict.batching) and `measured` (streams -> aggregate tok/s);
    `measurement`: the stored probe `rates` came from (its date and busy flag go into the note)."""
    flops = decode_flops(info, MemoryConfig(n_gpu_layers=0), 0, has_gpu=False)["cpu"]
    machine = roofs(info, rates, measurement)
    measured = measured or {}
    points = [RoofPoint(p.streams, p.intensity, p.aggregate_tps * flops,
                        measured[p.streams] * flops if p.streams in measured else None) for p in predicted]
    return BatchRoofline(machine.bandwidth, machine.peak_flops, flops, points, machine.note())
