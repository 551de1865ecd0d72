"""`roofline hw` with measured GPU devices: measured with --remeasure (the recorded device figure here, no live
probe), shown from the cache afterwards, and a device that cannot be measured is one line, not a failure."""

from __future__ import annotations

import dataclasses
import json

import pytest

from app.cli import main
from app.core.predict import hardware
from app.engine import device_probe_client as client


@pytest.fixture
def offloading(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = hardware.probe_hardware
    monkeypatch.setattr(hardware, "probe_hardware", lambda gpu_offload=None: dataclasses.replace(
        probe(gpu_offload=True), gpus=[]))


def test_remeasure_then_cached(offloading: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "--no-engine"]) == 0
    assert "Vulkan0 measured" not in capsys.readouterr().out  # nothing measured yet: nothing shown
    assert main(["hw", "--no-engine", "--json", "--remeasure"]) == 0
    (dev,) = json.loads(capsys.readouterr().out)["device_bandwidth"]
    assert dev["device"] == "Vulkan0" and dev["read_gbs"] == 6.0 and dev["gemm_gflops"] == 40.0
    assert main(["hw", "--no-engine"]) == 0
    out = capsys.readouterr().out
    assert "Vulkan0 measured" in out and "6 GB/s matrix-vector (F16 6, Q8_0 4.5" in out and "cached" in out
    assert "30 us a graph node" in out and "40 GFLOP/s" in out


def test_a_device_that_fails_is_one_line(offloading: None, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(device: str, *_: object, **__: object) -> None:
        raise client.DeviceProbeError(f"{device}: did not initialise")

    monkeypatch.setattr(client, "measure_device", failing)
    assert main(["hw", "--no-engine", "--remeasure"]) == 0
    out = capsys.readouterr().out
    assert "GPU probe" in out and "Vulkan0: did not initialise" in out


def test_a_cpu_only_build_measures_no_device(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    probe = hardware.probe_hardware
    monkeypatch.setattr(hardware, "probe_hardware", lambda gpu_offload=None: probe(gpu_offload=False))
    assert main(["hw", "--no-engine", "--json", "--remeasure"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["device_bandwidth"]
    assert "no GPU backend" in entry["error"]
