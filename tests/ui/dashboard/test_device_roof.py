"""The dashboard's roofline on a measured GPU: the device holding the weights gives both roofs (its measured
bandwidth and matrix multiply), the CPU's figures stay for a model in RAM."""

from __future__ import annotations

import json

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.core.predict.device_bandwidth import parse
from app.core.predict.machine_roofs import MachineRoofs
from app.ui.dashboard import roofline_math
from fake_engine import gemma_loaded

VULKAN = parse(json.dumps({"device": "Vulkan0", "description": "llvmpipe", "type": "gpu", "backend": "Vulkan",
                           "llama_cpp_version": "0.3.36", "read_gbs": 6.0,
                           "matvec_gbs": {"F16": 6.0}, "gemm_gflops": 40.0, "measured_at": "2026-12-01T12:00:00"}))

CPU = MachineRoofs(20e9, 150e9, 2, "2026-11-30T12:00:00+00:00", busy=False, calibrated=False)


def test_the_weights_device_is_the_one_with_most_model_buffers() -> None:
    assert roofline_math.weights_device({"model:Vulkan0": 900.0, "model:CPU_Mapped": 200.0, "KV:CPU": 5e3}) \
        == "Vulkan0"
    assert roofline_math.weights_device({"model:CPU_Mapped": 900.0, "model:CUDA0": 10.0}) is None
    assert roofline_math.weights_device({"KV:CUDA0": 10.0}) is None


def test_a_measured_device_gives_both_roofs() -> None:
    m = PhaseMetrics(prompt_tokens=64, prefill_tokens=64, prefill_ms=1000.0, decode_tokens=8, decode_ms=800.0)
    roof = roofline_math.device_roof(VULKAN)
    r = roofline_math.build([m], 500_000_000, 1_000_000_000, CPU, device=roof)
    assert r.bandwidth == 6e9 and r.peak_flops == 40e9 and r.peak_source == "measured on Vulkan0, 2026-12-01"


@pytest.mark.gui
def test_dashboard_draws_the_gpu_roof_for_an_offloaded_model(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.ui.dashboard import Dashboard
    from app.ui.engine_link.engine_qt import EngineQt

    dash = Dashboard(EngineQt())
    qtbot.addWidget(dash)
    dash.set_machine_roofs(CPU)
    dash.set_device_roofs({"Vulkan0": roofline_math.device_roof(VULKAN)})
    dash.set_loaded(gemma_loaded())  # weights in RAM: the CPU's roof
    assert "20.0 GB/s · compute roof: 150.0 GFLOP/s (measured 2026-11-30 · 2 threads)" in dash.roof_label.text()
    dash.set_loaded(gemma_loaded(n_gpu_layers=99, buffers_mib={"model:Vulkan0": 240.0, "model:CPU_Mapped": 1.0}))
    text = dash.roof_label.text()
    assert "6.0 GB/s · compute roof: 40.0 GFLOP/s (measured on Vulkan0, 2026-12-01)" in text
