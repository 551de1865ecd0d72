"""This machine's two roofs, memory bandwidth and compute, from its one stored measurement.

The dashboard's roofline, the Lab's batching roofline and Discover's picks all start from the same record: the
bandwidth and compute probe of app.core.predict.bandwidth, stored per machine with its date and whether the machine
was busy. `machine_figures` turns it into the speed model's rates for a thread count (a stored calibration
applied), and `roofs` turns those rates into the two roofs for a model: the effective read bandwidth (the slope)
and llama.cpp's kernels at the width where they run fastest over the model's weights (the compute roof, the
ceiling the batch prediction approaches). Both plots draw these, so they cannot disagree about the same machine,
model and thread count; the note they show says when the figures were measured, and whether while busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.predict.memory import MemoryConfig

if TYPE_CHECKING:
    from app.core.gguf.info import GGUFInfo
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.hardware import HardwareInfo
    from app.core.predict.speed import Rates


@dataclass(frozen=True)
class MachineRoofs:
    bandwidth: float  # bytes/s: the speed model's effective read bandwidth for `threads`
    peak_flops: float  # FLOP/s: the kernels at their fastest batched width over the model's weights
    threads: int
    measured_at: str  # the stored measurement's time; "": none yet (assumed figures)
    busy: bool  # the measurement ran while other work competed for the cores (its figures are low)
    calibrated: bool  # a stored `roofline calibrate` result adjusted the rates

    @property
    def ridge(self) -> float:
        """The intensity (FLOPs per byte) where the slope meets the compute roof."""
        return self.peak_flops / self.bandwidth if self.bandwidth else 0.0

    def roof(self, intensity: float) -> float:
        return min(self.peak_flops, self.bandwidth * intensity)

    def note(self) -> str:
        """One line for under a plot: when measured, whether busy, calibrated, for how many threads."""
        when = f"measured {self.measured_at[:10]}" if self.measured_at else "assumed: not measured yet"
        parts = [when + (", while busy: low" if self.busy else "")]
        if self.calibrated:
            parts.append("calibrated")
        parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        return " · ".join(parts)


def si(value: float) -> str:
    """A figure with its SI prefix and the space before the unit: "53.0 G", "1.2 T"."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} "


def roofs_line(bandwidth: float, peak_flops: float, note: str) -> str:
    """The two roofs in words, as the dashboard's Roofline box and the Lab's batching plot both say them."""
    return f"Bandwidth roof: {bandwidth / 1e9:.1f} GB/s · compute roof: {si(peak_flops)}FLOP/s" + (
        f" ({note})" if note else "")


def roofs(info: GGUFInfo, rates: Rates, measured: BandwidthResult | None) -> MachineRoofs:
    """The CPU roofs for `info` under `rates` (which `measured` produced)."""
    from app.core.predict.batching import fastest_column_s
    from app.core.predict.speed import weight_groups

    cfg = MemoryConfig(n_gpu_layers=0)
    column = fastest_column_s(info, rates, cfg)
    # every weight at its fastest batched rate, 2 FLOPs per weight
    weight_flops = 2.0 * sum(g.elements for g in weight_groups(info, cfg, has_gpu=False)["cpu"].values())
    cpu = rates.cpu
    return MachineRoofs(cpu.effective_bandwidth, weight_flops / column if column else 0.0, cpu.threads,
                        measured.measured_at if measured is not None else "", bool(measured and measured.busy),
                        cpu.calibrated)


def machine_figures(threads: int | None = None, batch_threads: int | None = None, measure: bool = True,
                    gpu_backend: str | None = None, hw: HardwareInfo | None = None,
                    ) -> tuple[Rates, BandwidthResult | None]:
    """This machine's rates for `threads` (None: llama.cpp's default) from the stored measurement, measured
    first when `measure` and none is usable (app.core.predict.bandwidth.get_bandwidth), and that measurement."""
    from app.core.predict import bandwidth
    from app.core.predict.calibration import calibrated_rates
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.speed import default_rates

    hw = hw or probe_hardware()
    measured = bandwidth.get_bandwidth(hw.machine_key) if measure else bandwidth.load_cached(hw.machine_key)
    rates = default_rates(hw, measured, threads=threads, batch_threads=batch_threads)
    return calibrated_rates(rates, hw.machine_key, "cpu", gpu_backend), measured


def roofs_for_model(model_path: str, threads: int | None = None, measure: bool = False) -> MachineRoofs:
    """The roofs for a model file run with `threads`: what the dashboard draws for the loaded model."""
    from app.core.gguf.info import inspect_gguf

    rates, measured = machine_figures(threads, measure=measure)
    return roofs(inspect_gguf(model_path), rates, measured)
