"""Run the device probe (`python -m app.engine.llama.device_probe`) as a child process, with a timeout.

No llama_cpp here: the probe loads llama.cpp in its own process, as the engine does. A probe that fails, hangs
past its timeout or dies (a driver abort inside ggml cannot be caught in Python) is a `DeviceProbeError` with a
one-line message, never an exception of another kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app.core.predict.device_bandwidth import DeviceBandwidth, parse
from app.core.predict.hardware import LlamaDevice

PROBE_TIMEOUT_S = 180.0  # llvmpipe compiles every shader at start and runs each product at CPU speed
LIST_TIMEOUT_S = 60.0


class DeviceProbeError(Exception):
    """The device could not be measured; `str(err)` is one line for the user."""


def probe_command(*args: str) -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "--device-probe", *args]
    return [sys.executable, "-m", "app.engine.llama.device_probe", *args]


def _run(args: list[str], timeout: float, env: dict[str, str] | None) -> str:
    """The child's last JSON line (its stdout; llama.cpp logs to stderr)."""
    try:
        done = subprocess.run(probe_command(*args, "--json"), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})}, check=False)
    except subprocess.TimeoutExpired as exc:
        raise DeviceProbeError(f"the device probe did not finish within {timeout:.0f} s") from exc
    except OSError as exc:
        raise DeviceProbeError(f"the device probe did not start ({exc})") from exc
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise DeviceProbeError(f"the device probe gave no result ({tail[:200]})")
    return lines[-1]


def list_devices(timeout: float = LIST_TIMEOUT_S, env: dict[str, str] | None = None) -> list[LlamaDevice]:
    """llama.cpp's devices as the probe's process sees them (`env` added to this process's environment)."""
    line = _run(["--list"], timeout, env)
    try:
        data = json.loads(line)
        if "error" in data:
            raise DeviceProbeError(str(data["error"]))
        return [LlamaDevice(**d) for d in data["devices"]]
    except (ValueError, TypeError, KeyError) as exc:
        raise DeviceProbeError(f"the device list is unreadable ({exc})") from exc


def measure_device(device: str, timeout: float = PROBE_TIMEOUT_S, env: dict[str, str] | None = None,
                   extra_args: list[str] | None = None) -> DeviceBandwidth:
    """Measure `device` ("Vulkan0") in a child process. Raises DeviceProbeError."""
    line = _run(["--device", device, *(extra_args or [])], timeout, env)
    try:
        return parse(line)
    except ValueError as exc:
        raise DeviceProbeError(f"{device}: {exc}") from exc
