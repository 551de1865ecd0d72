"""`roofline hw [--json] [--remeasure] [--no-engine]`: this machine's CPU, memory, GPUs, measured bandwidth, and
which build of llama.cpp's CPU code the engine chose for this CPU (a portable build picks one variant per ISA
level at start; the engine process is asked, since only it may load llama.cpp); the GPU devices' measured
figures come from app.commands._device_figures."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.hardware import HardwareInfo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="show CPU, RAM, GPUs and measured memory bandwidth (what bounds decode)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--remeasure", action="store_true",
                   help="measure memory bandwidth again (about 1-2 s), and each GPU device's (seconds each)")
    p.add_argument("--no-engine", action="store_true",
                   help="do not start the engine to ask which llama.cpp CPU variant it uses")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.commands._common import print_json
    from app.commands._device_figures import describe_devices, device_figures
    from app.core.predict.bandwidth import get_bandwidth
    from app.core.predict.hardware import LlamaDevice, probe_hardware

    engine: dict[str, Any] = {}
    asker = None
    if not args.no_engine:  # the engine starts while the probes run: its import of llama.cpp takes a moment
        asker = threading.Thread(target=lambda: engine.update(ask_engine()), name="hw-engine", daemon=True)
        asker.start()
    hw = probe_hardware()
    bw = get_bandwidth(hw.machine_key, remeasure=args.remeasure)
    devices, problems = device_figures(hw, args.remeasure)
    if asker is not None:
        asker.join(ENGINE_TIMEOUT_S + 5)
    if "devices" in engine:
        hw.llama_devices = [LlamaDevice(**d) for d in engine["devices"]]
        hw.gpu_offload = bool(engine["gpu_offload"])
    if args.json:
        data = hw.to_dict()
        data["bandwidth"] = bw.to_dict()
        data["device_bandwidth"] = [d.to_dict() for d in devices] + [{"error": p} for p in problems]
        if engine:
            data["llama_cpp"] = engine
        print_json(data)
        return 0
    for label, value in describe(hw, bw, engine or None) + describe_devices(devices, problems):
        print(f"{label:<18} {value}")
    return 0


ENGINE_TIMEOUT_S = 30.0


def ask_engine(timeout: float = ENGINE_TIMEOUT_S) -> dict[str, Any]:
    """Start the engine, read its Ready event (llama.cpp version, CPU variant, GPU offload), stop it."""
    from app.engine import protocol as P
    from app.engine.client import EngineClient, EngineError

    try:
        with EngineClient() as client:
            ready = client.wait_for((P.Ready,), timeout)
    except (EngineError, OSError) as exc:
        return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    return {"version": ready.llama_cpp_version, "cpu_backend": ready.cpu_backend or "unknown",
            "gpu_offload": ready.gpu_offload, "backends": ready.backends, "devices": ready.devices}


def describe(hw: HardwareInfo, bw: BandwidthResult,
             engine: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    from app.core.metrics.phase import fmt_bytes

    def size(n: int | None) -> str:
        return fmt_bytes(n) if n is not None else "unknown"

    cpu = hw.cpu
    cores = f"{cpu.physical_cores or '?'} physical / {cpu.logical_cores or '?'} logical"
    when = "cached, " + bw.measured_at if bw.cached else "just measured"
    if bw.busy:
        when += ", while the machine was busy: low"
    if bw.kept_over_busy:
        when += "; the re-measure found the machine busy, so this quiet measurement is kept"
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
    if not hw.gpus and not hw.offload_gpus:
        lines.append(("GPU", "none detected (decode runs from RAM)"))
    for g in hw.gpus if hw.llama_devices is None else hw.hidden_gpus:
        facts = [f"{size(g.memory_total)} {'unified' if g.unified_memory else 'VRAM'}"]
        if g.memory_free is not None:
            facts.append(f"{size(g.memory_free)} free")
        facts.append(f"{g.bandwidth_gbs:.0f} GB/s" if g.bandwidth_gbs else "bandwidth unknown")
        if g.compute_capability:
            facts.append(f"compute {g.compute_capability}")
        hidden = " — llama.cpp does not see it" if hw.llama_devices is not None else ""
        lines.append((f"GPU {g.index}", f"{g.name}: " + ", ".join(facts) + hidden))
    gpu_backends = [b for b in (engine or {}).get("backends", []) if b not in ("CPU", "BLAS", "RPC")]
    offload = {True: "yes", False: "no (this llama.cpp build is CPU-only)", None: "unknown"}[hw.gpu_offload]
    if hw.gpu_offload is False and gpu_backends:
        offload = f"no: this build's {', '.join(gpu_backends)} backend sees no device"
    lines.append(("GPU offload", offload))
    if engine is not None and "backends" in engine:
        lines.append(("llama.cpp backends", ", ".join(engine["backends"]) or "none registered"))
    for d in hw.llama_devices or []:
        if d.type == "cpu":
            continue
        match = next((g for g in hw.offload_gpus if g.device == d.name), None)
        bw_text = f", {match.bandwidth_gbs:.0f} GB/s" if match is not None and match.bandwidth_gbs else ""
        lines.append((f"device {d.name}", f"{d.description} ({d.type}): {size(d.memory_total)} total, "
                      f"{size(d.memory_free)} free{bw_text}"))
    if hw.llama_devices is not None and not hw.offload_gpus and "Vulkan" in gpu_backends:
        lines.append(("Vulkan", "no device visible (a CPU-type Vulkan device such as llvmpipe is used only when "
                      "GGML_VK_VISIBLE_DEVICES names it)"))
    if engine is not None:
        if "error" in engine:
            lines.append(("llama.cpp CPU", f"unknown: the engine did not start ({engine['error']})"))
        else:
            lines.append(("llama.cpp CPU", f"{engine['cpu_backend']} (llama-cpp-python {engine['version']})"))
    return lines
