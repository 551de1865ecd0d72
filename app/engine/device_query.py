"""Ask the installed llama.cpp which devices it sees, from a process that must not load it (the CLI, the core).

A short child (`python -m app.engine.llama.devices`) prints the device list as JSON; the answer is kept for the
life of this process, since the set of devices (and what GGML_VK_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES let
through) does not change under a running app. A build without a GPU backend is not asked: it offloads nowhere,
and starting a child costs a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache

from app.core.predict.hardware import LlamaDevice, llama_cpp_gpu_backends

QUERY_TIMEOUT_S = 60.0  # a Vulkan driver's first start can take a while; llvmpipe compiles nothing here


def query_devices(timeout: float = QUERY_TIMEOUT_S) -> list[LlamaDevice] | None:
    """The devices llama.cpp sees, in its order; None when it cannot be asked (no GPU backend built, the child
    failed or timed out): callers then fall back to the drivers' view."""
    if not llama_cpp_gpu_backends():
        return None
    return _query(timeout, os.environ.get("GGML_VK_VISIBLE_DEVICES"), os.environ.get("CUDA_VISIBLE_DEVICES"))


@lru_cache(maxsize=4)
def _query(timeout: float, _vk_visible: str | None, _cuda_visible: str | None) -> list[LlamaDevice] | None:
    # The visibility variables are part of the cache key: a test (or a user) changing them asks again.
    try:
        done = subprocess.run([sys.executable, "-m", "app.engine.llama.devices"], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
        return [LlamaDevice(**d) for d in json.loads(lines[-1])] if lines else None
    except (ValueError, TypeError):
        return None
