"""The device probe's process from the app's side: its JSON line read, its failures (an error line, a crash, a
hang past the timeout) each one `DeviceProbeError` line. The child here is a stand-in script, not llama.cpp."""

from __future__ import annotations

import json
import sys

import pytest

from app.engine import device_probe_client as client

LINE = {"device": "Vulkan0", "description": "llvmpipe", "type": "gpu", "backend": "Vulkan",
        "llama_cpp_version": "0.3.36", "read_gbs": 7.0, "matvec_gbs": {"F16": 7.0}, "copy_gbs": 4.0,
        "gemm_gflops": 30.0}


def child(monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    monkeypatch.setattr(client, "probe_command", lambda *args: [sys.executable, "-c", script, *args])


# the module's own functions, not the recorded machine's stand-ins (they are what is under test here)
pytestmark = pytest.mark.live_probe


def test_the_last_json_line_is_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, "import sys; print('llama.cpp says hello'); print('{\"x\": 1}'); "
                       f"print({json.dumps(json.dumps(LINE))}); print('log', file=sys.stderr)")
    r = client.measure_device("Vulkan0")
    assert (r.device, r.read_gbs, r.matvec_gbs) == ("Vulkan0", 7.0, {"F16": 7.0})


@pytest.mark.parametrize(("script", "message"), [
    ('print(\'{"error": "no ggml device called Vulkan0"}\')', "Vulkan0: no ggml device called Vulkan0"),
    ("import sys; print('ggml_abort: boom', file=sys.stderr); sys.exit(134)", "gave no result (ggml_abort: boom)"),
    ("import sys; sys.exit(3)", "gave no result (exit status 3)"),
    ("import time; time.sleep(30)", "did not finish within 1 s"),
])
def test_failures_are_one_line(monkeypatch: pytest.MonkeyPatch, script: str, message: str) -> None:
    child(monkeypatch, script)
    with pytest.raises(client.DeviceProbeError) as err:
        client.measure_device("Vulkan0", timeout=1.0)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_device_list_and_the_environment_reach_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, "import json, os; print(json.dumps({'devices': [{'name': os.environ['PROBE_NAME'], "
                       "'description': 'd', 'type': 'gpu', 'backend': 'Vulkan', 'memory_total': 1, "
                       "'memory_free': 1}]}))")
    (dev,) = client.list_devices(env={"PROBE_NAME": "Vulkan0"})
    assert dev.name == "Vulkan0" and dev.offloads
    child(monkeypatch, "print('{\"devices\": [{\"name\": 1}]}')")
    with pytest.raises(client.DeviceProbeError, match="unreadable"):
        client.list_devices()
