"""`roofline hw [--json] [--remeasure]`: this machine's CPU, memory, GPUs and measured bandwidth."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.bandwidth import BandwidthResult
    from app.core.hardware import HardwareInfo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="show CPU, RAM, GPUs and measured memory bandwidth (what bounds decode)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--remeasure", action="store_true", help="measure memory bandwidth again (about 1-2 s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.commands._common import print_json
    from app.core.bandwidth import get_bandwidth
    from app.core.hardware import probe_hardware

    hw = probe_hardware()
    bw = get_bandwidth(hw.machine_key, remeasure=args.remeasure)
    if args.json:
        data = hw.to_dict()
        data["bandwidth"] = bw.to_dict()
        print_json(data)
        return 0
    for label, value in describe(hw, bw):
        print(f"{label:<18} {value}")
    return 0


def describe(hw: HardwareInfo, bw: BandwidthResult) -> list[tuple[str, str]]:
    from app.core.metrics import fmt_bytes

    def size(n: int | None) -> str:
        return fmt_bytes(n) if n is not None else "unknown"

    cpu = hw.cpu
    cores = f"{cpu.physical_cores or '?'} physical / {cpu.logical_cores or '?'} logical"
    when = "cached, " + bw.measured_at if bw.cached else "just measured"
    lines = [
        ("CPU", f"{cpu.model} ({cpu.arch})"),
        ("cores", cores),
        ("CPU features", ", ".join(cpu.features) or "none of interest detected"),
        ("RAM", f"{size(hw.ram_total)} total, {size(hw.ram_available)} available"),
        ("memory bandwidth", (f"{bw.read_gbs:.1f} GB/s read, {bw.copy_gbs:.1f} GB/s copy ({bw.threads} "
                             f"threads; {when})")),
    ]
    if bw.gemm_gflops:
        lines.append(("CPU compute", f"{bw.gemm_gflops:.0f} GFLOP/s float32 matrix multiply (prefill yardstick)"))
    if not hw.gpus:
        lines.append(("GPU", "none detected (decode runs from RAM)"))
    for g in hw.gpus:
        facts = [f"{size(g.memory_total)} {'unified' if g.unified_memory else 'VRAM'}"]
        if g.memory_free is not None:
            facts.append(f"{size(g.memory_free)} free")
        facts.append(f"{g.bandwidth_gbs:.0f} GB/s" if g.bandwidth_gbs else "bandwidth unknown")
        if g.compute_capability:
            facts.append(f"compute {g.compute_capability}")
        lines.append((f"GPU {g.index}", f"{g.name}: " + ", ".join(facts)))
    offload = {True: "yes", False: "no (this llama.cpp build is CPU-only)", None: "unknown"}[hw.gpu_offload]
    lines.append(("GPU offload", offload))
    return lines
