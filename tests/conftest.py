"""Shared test set-up: an isolated ROOFLINE_HOME per test, offscreen Qt, the real default model once, and a
recorded machine instead of live measurements (a test never reads a live bandwidth or free-memory figure)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The shared fakes, stand-in servers and file writers of tests/helpers/ are imported by their module names.
HELPERS = Path(__file__).resolve().parent / "helpers"
sys.path.insert(0, str(HELPERS))

# hypothesis keeps caches in ./.hypothesis (inside the checkout) as soon as a test module is collected: give it
# a temporary folder instead, removed when the run ends.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="roofline-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)
set_hypothesis_home_dir(_HYPOTHESIS_HOME)

# reliability counts printed at the end; sub-runs; the loopback hub, the hostile OpenAI server and the window
# fixtures for every test that names them (contrast: the theme put back after a test switched it)
pytest_plugins = ["reliability_plugin", "pytester", "hubserver", "hostile_openai", "fake_window", "chat_drive",
                  "metrics_server", "fake_ollama", "contrast"]


@pytest.fixture(scope="session")
def default_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real embedded model (Gemma 3 270M Q4_K_M), assembled and verified once per run into a temporary
    ROOFLINE_HOME: a test run never writes into the user's own data folder."""
    from app.core.models.default_model import default_model_path

    saved = {name: os.environ.pop(name, None) for name in ("ROOFLINE_DEFAULT_MODEL", "ROOFLINE_HOME")}
    os.environ["ROOFLINE_HOME"] = str(tmp_path_factory.mktemp("default-model-home"))
    try:
        path = default_model_path()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return path


@pytest.fixture(autouse=True)
def roofline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """Every test gets its own data/config/cache dirs; the default model points at the shared copy."""
    home = tmp_path / "roofline-home"
    home.mkdir()
    if "default_model" in request.fixturenames:
        model = request.getfixturevalue("default_model")
        monkeypatch.setenv("ROOFLINE_DEFAULT_MODEL", str(model))
    monkeypatch.setenv("ROOFLINE_HOME", str(home))
    return home


# A 2-core VM's figures, recorded: the probes' outputs that every prediction starts from. Live measurements
# differ from call to call (more so on a busy machine, where `get_bandwidth` measures again on every call), so
# a test that computed a prediction twice could see two machines.
RECORDED_BANDWIDTH = {
    "read_gbs": 20.7, "copy_gbs": 14.2, "threads": 2, "buffer_bytes": 256 << 20, "runs": 6, "seconds": 1.9,
    "measured_at": "2026-12-01T12:00:00+00:00", "gemm_gflops": 56.3, "busy": False, "read_gbs_1t": 12.1,
    "gemm_gflops_1t": 29.4,
}

# The device probe's figures on Mesa's llvmpipe (a Vulkan device that runs on the CPU), recorded: no test starts
# the probe's process or reads a live device measurement.
RECORDED_DEVICE = {
    "device": "Vulkan0", "description": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "gpu", "backend": "Vulkan",
    "llama_cpp_version": "0.3.36", "read_gbs": 6.0,
    "matvec_gbs": {"F16": 6.0, "Q8_0": 4.5, "Q4_0": 3.0, "Q4_K": 2.5, "Q6_K": 2.0, "Q5_0": 2.5},
    "copy_gbs": 5.0, "gemm_gflops": 40.0, "node_us": 30.0, "matrix_bytes": 256 << 20, "seconds": 9.0,
    "measured_at": "2026-12-01T12:00:00+00:00",
}
RECORDED_DEVICES = [
    {"name": "CPU", "description": "recorded CPU", "type": "cpu", "backend": "CPU", "memory_total": 8 << 30,
     "memory_free": 8 << 30},
    {"name": "Vulkan0", "description": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "gpu", "backend": "Vulkan",
     "memory_total": 8 << 30, "memory_free": 8 << 30},
]


@pytest.fixture(scope="session")
def recorded_memory() -> tuple[int | None, int | None]:
    """This machine's total and free memory, read once per run: every test sees the same machine."""
    from app.core.predict import hardware

    return hardware.probe_memory()


@pytest.fixture(scope="session")
def recorded_llama_devices() -> list[object] | None:
    """The devices the installed llama.cpp sees (free memory included), asked once per run."""
    from app.engine import device_query

    return device_query.query_devices()


@pytest.fixture(autouse=True)
def recorded_machine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bandwidth and compute probes (the GPU device probe's process too) return the recorded figures, the
    machine never reads as busy, and free memory (of RAM, and of the devices llama.cpp sees) is the figure read
    at the start of the run. Tests of the probes themselves are marked `live_probe` and get the real ones."""
    if request.node.get_closest_marker("live_probe"):
        return
    from app.core.predict import bandwidth, hardware
    from app.core.predict.device_bandwidth import DeviceBandwidth, installed_llama_version
    from app.core.predict.hardware import LlamaDevice
    from app.engine import device_probe_client

    def recorded_bandwidth(threads: int | None = None, **_: object) -> bandwidth.BandwidthResult:
        return bandwidth.BandwidthResult.from_dict(RECORDED_BANDWIDTH)

    def recorded_gemm(threads: int | None = None, **_: object) -> float:
        per_core = RECORDED_BANDWIDTH["gemm_gflops_1t"]
        assert isinstance(per_core, float)
        return per_core * (threads or 1)

    def recorded_device(device: str, *_: object, **__: object) -> DeviceBandwidth:
        # the installed build's version, as the real probe reports it: the cache keeps results per version
        return DeviceBandwidth.from_dict({**RECORDED_DEVICE, "device": device,
                                          "llama_cpp_version": installed_llama_version()})

    def recorded_devices(*_: object, **__: object) -> list[LlamaDevice]:
        return [LlamaDevice(**d) for d in RECORDED_DEVICES]  # type: ignore[arg-type]

    memory = request.getfixturevalue("recorded_memory")
    monkeypatch.setattr(device_probe_client, "measure_device", recorded_device)
    monkeypatch.setattr(device_probe_client, "list_devices", recorded_devices)
    monkeypatch.setattr(bandwidth, "measure_bandwidth", recorded_bandwidth)
    monkeypatch.setattr(bandwidth, "measure_gemm", recorded_gemm)
    monkeypatch.setattr(bandwidth, "machine_busy", lambda: False)
    monkeypatch.setattr(hardware, "probe_memory", lambda: memory)
    from app.engine import device_query

    devices = request.getfixturevalue("recorded_llama_devices")
    monkeypatch.setattr(device_query, "query_devices", lambda timeout=0.0: devices)


@pytest.fixture(scope="module")
def server(default_model: Path) -> Iterator[str]:
    """URL of llama-cpp-python's OpenAI-compatible server on the default model (key `llama_server.KEY`),
    started once per test module that asks for it."""
    from llama_server import start_server

    proc, url = start_server(default_model)
    yield url
    proc.kill()
    proc.wait(10)
