"""The Memory box's GPU line: what this engine holds on each device (llama.cpp's own buffer sizes from its load)
and the device's free memory from the latest stats; NVML's view only when the engine reports no GPU."""

from __future__ import annotations

from app.engine import protocol as P
from app.ui.dashboard.memory import device_text
from fake_engine import loaded_event


def _stats(devices: list[dict[str, object]]) -> P.Stats:
    return P.Stats(rss_bytes=1, kv_cells_used=0, kv_cells_allocated=0, kv_bytes_used=0, kv_bytes_allocated=0,
                   loaded=True, devices=devices)  # type: ignore[arg-type]


def test_the_engines_buffers_on_the_device_and_its_free_memory() -> None:
    loaded = loaded_event()
    loaded.buffers_mib = {"model:Vulkan0": 235.76, "KV:Vulkan0": 24.0, "compute:Vulkan0": 65.76,
                          "model:CPU": 137.94, "compute:Vulkan_Host": 300.25}
    dev = {"name": "Vulkan0", "description": "Radeon RX 7600", "memory_total": 8 << 30, "memory_free": 7 << 30}
    text = device_text(loaded, _stats([dev]))
    assert text is not None and text.startswith("GPU: Vulkan0 (Radeon RX 7600): this engine 326 MiB")
    assert "KV 24 · compute 66 · model 236" in text and "free of" in text
    assert "Vulkan_Host" not in text and "138" not in text  # host memory is not the device's


def test_no_gpu_in_the_stats_leaves_the_line_to_nvml() -> None:
    assert device_text(loaded_event(), _stats([])) is None and device_text(None, None) is None
