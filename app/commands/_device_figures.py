"""The measured GPU figures `roofline hw` shows: cached per device, or measured again with --remeasure.

Measuring starts the device probe's process once to list llama.cpp's devices and once per offload device (each a
few seconds; a CPU-emulated Vulkan device such as llvmpipe takes longer). A device that cannot be measured is
reported on its own line; the rest of `roofline hw` does not depend on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.predict.device_bandwidth import DeviceBandwidth
    from app.core.predict.hardware import HardwareInfo


def device_figures(hw: HardwareInfo, remeasure: bool) -> tuple[list[DeviceBandwidth], list[str]]:
    """(measured devices, one-line problems): the cached ones, or with `remeasure` every offload device measured
    now (a CPU-only llama.cpp build has none to measure)."""
    from app.core.predict import device_bandwidth as db
    from app.engine import device_probe_client as client

    version = db.installed_llama_version()
    if not remeasure:
        return db.cached_devices(hw.machine_key, version), []
    if hw.gpu_offload is False:
        return [], ["no GPU backend in this llama.cpp build: no device to measure"]
    try:
        devices = [d for d in client.list_devices() if d.offloads]
    except client.DeviceProbeError as exc:
        return [], [str(exc)]
    if not devices:
        return [], ["llama.cpp sees no GPU device (a CPU-type Vulkan device needs GGML_VK_VISIBLE_DEVICES)"]
    found, problems = [], []
    for d in devices:
        try:
            found.append(db.get_device_bandwidth(hw.machine_key, d.name, d.description, version,
                                                 client.measure_device, remeasure=True))
        except client.DeviceProbeError as exc:
            problems.append(str(exc))
    return found, problems


def describe_devices(devices: list[DeviceBandwidth], problems: list[str]) -> list[tuple[str, str]]:
    """`roofline hw`'s lines for the measured devices."""
    lines = []
    for d in devices:
        when = "cached, " + d.measured_at if d.cached else "just measured"
        per_type = ", ".join(f"{t} {g:.3g}" for t, g in d.matvec_gbs.items())
        # three significant figures: a GPU's hundreds of GB/s and a CPU-emulated device's hundredths alike
        lines.append((f"{d.device} measured",
                      f"{d.description}: {d.read_gbs:.3g} GB/s matrix-vector ({per_type}), {d.copy_gbs:.3g} GB/s "
                      f"copy, {d.gemm_gflops:.3g} GFLOP/s F16 matrix multiply, {d.node_us:.3g} us a graph node "
                      f"({when})"))
    lines += [("GPU probe", p) for p in problems]
    return lines
