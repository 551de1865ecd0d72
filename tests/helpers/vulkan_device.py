"""A real GPU backend device for the `gpu` tests: Vulkan (Mesa's llvmpipe on a machine without a GPU) or CUDA.

llama.cpp's Vulkan backend ignores CPU-type devices unless GGML_VK_VISIBLE_DEVICES names them, so every other test
runs on the CPU even with a Vulkan build; a gpu test sets the variable only in its own child processes
(`gpu_env()`), never in the test process. Where no device is visible the gpu tests skip, saying why — except under
ROOFLINE_REQUIRE_GPU=1 (what .ci/run sets after installing Mesa's Vulkan driver), where a missing device fails
the test instead of hiding it.

`load_logs()` loads a model in a child with the given placement and returns llama.cpp's log lines: its per-device
buffer sizes are the ground truth the memory estimate is held to.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BUFFER_LINE = re.compile(r"(\S+)\s+(model|KV|compute|output|REPACK) buffer size =\s*([\d.]+) MiB")
MiB = 1 << 20


def gpu_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child that may use llvmpipe (a real GPU, when present, is used anyway)."""
    env = dict(os.environ if base is None else base)
    env.setdefault("GGML_VK_VISIBLE_DEVICES", "0")
    return env


_DEVICE_SCRIPT = """
import json
from dataclasses import asdict
from app.engine.llama.backends import load_backends
from app.engine.llama.devices import list_devices
load_backends()
print(json.dumps([asdict(d) for d in list_devices() if d.offloads]))
"""


def offload_devices() -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-c", _DEVICE_SCRIPT], env=gpu_env(), capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        return []
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    return json.loads(lines[-1]) if lines else []


_DEVICES: list[list[dict[str, Any]]] = []


def gpu_device() -> dict[str, Any]:
    """The first device llama.cpp offloads to in a gpu child; skips (or fails under ROOFLINE_REQUIRE_GPU=1)."""
    if not _DEVICES:
        _DEVICES.append(offload_devices())
    if _DEVICES[0]:
        return _DEVICES[0][0]
    reason = ("no GPU backend device: this llama.cpp has no GPU backend, or no Vulkan/CUDA device is visible "
              "(install mesa-vulkan-drivers for llvmpipe; see README)")
    if os.environ.get("ROOFLINE_REQUIRE_GPU") == "1":
        pytest.fail(reason + " — and ROOFLINE_REQUIRE_GPU=1 asks for one")
    pytest.skip(reason)


# A gpu child's first lines: llama.cpp's backends loaded as the engine loads them, its log collected in `lines`
LOG_PRELUDE = """
import ctypes, json, sys
import llama_cpp
from app.engine.llama.backends import load_backends
load_backends()
lines = []
@llama_cpp.llama_log_callback
def on_log(level, text, user_data):
    lines.append(text.decode("utf-8", errors="replace"))
llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))
"""

_LOAD_SCRIPT = LOG_PRELUDE + """
args = json.loads(sys.argv[1])
kwargs = args["kwargs"]
# --n-cpu-moe as the engine sets it (app.engine.llama.expert_placement), through Llama()'s params function
from app.engine.llama.expert_placement import ExpertOverrides
experts = ExpertOverrides(kwargs.pop("n_cpu_moe", 0))
original = llama_cpp.llama_cpp.llama_model_default_params
def params():
    p = original()
    p.tensor_buft_overrides = experts.address
    return p
llama_cpp.llama_cpp.llama_model_default_params = params
llm = llama_cpp.Llama(model_path=args["path"], verbose=False, **kwargs)
n_ctx = llama_cpp.llama_n_ctx(llm._ctx.ctx)
llm.close()
print(json.dumps({"n_ctx": n_ctx, "log": "".join(lines)}))
"""


def load_logs(path: Path, **kwargs: Any) -> tuple[int, str]:
    """(llama_n_ctx, llama.cpp's log of the load) for `Llama(path, **kwargs)` in a gpu child."""
    done = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT, json.dumps({"path": str(path), "kwargs": kwargs})],
                          env=gpu_env(), capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise AssertionError(f"loading {path.name} with {kwargs} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return int(out["n_ctx"]), str(out["log"])


def buffers(log: str) -> dict[tuple[str, str], float]:
    """{(device, kind): MiB} from llama.cpp's buffer-size lines; a device's repeated kind is summed."""
    out: dict[tuple[str, str], float] = {}
    for dev, kind, mib in BUFFER_LINE.findall(log):
        out[(dev, kind)] = out.get((dev, kind), 0.0) + float(mib)
    return out
