"""Resource limits on the engine process, so a hostile model or chat template cannot take the machine down.

The engine renders GGUF chat templates and runs llama.cpp on files from the internet. Inside it, the template
sandbox (app/core/chat/template_sandbox.py) bounds steps, time and sizes; these limits are the backstop for what
gets past it, set by the app on the child process (Linux `prlimit`):

- Address space (RLIMIT_AS): the model's estimated memory (weights, KV cache, compute buffers) doubled, plus
  `BASE_BYTES` for Python, llama.cpp and thread stacks, and never under `MIN_BYTES`. Set again at every load,
  so a bigger model gets a bigger limit. An allocation past it fails (MemoryError in Python, which the engine
  reports) instead of waking the OOM killer. Not set when the engine can offload to a GPU: CUDA and Metal
  reserve far more address space than they use, and a limit would break them.
- CPU time (RLIMIT_CPU): before each request, the CPU time used so far plus `CPU_SECONDS_PER_REQUEST` times the
  core count. Only a request spinning for hours on every core meets it (the engine then dies with SIGXCPU and
  the app says so, and starts a fresh engine as after any crash).

Why not `preexec_fn`: the GUI has threads, and Python documents preexec_fn as unsafe (it can deadlock the child
before exec) in a process with threads. `prlimit` on the started child has no such risk; nothing untrusted runs
in it before the first Load. Elsewhere: macOS does not enforce RLIMIT_AS and has no prlimit; on Windows a job
object with a memory limit would do the same (not done yet: see docs/reliability.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

GIB = 1 << 30
BASE_BYTES = 6 * GIB  # Python + llama.cpp + numpy mapped, malloc arenas and thread stacks reserved
MIN_BYTES = 8 * GIB
CPU_SECONDS_PER_REQUEST = 4 * 3600  # per core: hours of work, far past any real prompt or reply


def supported() -> bool:
    import resource

    return sys.platform.startswith("linux") and hasattr(resource, "prlimit")


def address_space_for(model_path: str, config: Any) -> int:
    """The RLIMIT_AS for an engine about to load `model_path` with `config` (a protocol.LoadConfig)."""
    try:
        from app.core.gguf.info import inspect_gguf
        from app.core.predict.memory import MemoryConfig, estimate_memory

        info = inspect_gguf(model_path)
        cfg = MemoryConfig(n_ctx=config.n_ctx, type_k=config.type_k, type_v=config.type_v,
                           flash_attn=config.flash_attn, n_batch=config.n_batch, n_ubatch=config.n_ubatch,
                           swa_full=config.swa_full)
        need = max(estimate_memory(info, cfg, has_gpu=False).total, info.file_size or 0)
    except Exception:  # noqa: BLE001 - an unreadable file gets a limit from its size; the load reports the rest
        try:
            need = 2 * Path(model_path).stat().st_size
        except OSError:
            need = 0
    return max(MIN_BYTES, 2 * need + BASE_BYTES)


def set_address_space(pid: int, limit: int | None) -> None:
    """Set (or with None lift) the soft RLIMIT_AS of process `pid`; the hard limit stays as it is."""
    import resource

    _soft, hard = resource.prlimit(pid, resource.RLIMIT_AS)
    soft = resource.RLIM_INFINITY if limit is None else limit
    if hard != resource.RLIM_INFINITY:
        soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    resource.prlimit(pid, resource.RLIMIT_AS, (soft, hard))


def cpu_seconds_used(pid: int) -> float:
    """User + system CPU time of `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def set_cpu_budget(pid: int, seconds: float) -> None:
    """Let `pid` use `seconds` more CPU time from now (soft RLIMIT_CPU; then SIGXCPU)."""
    import resource

    _soft, hard = resource.prlimit(pid, resource.RLIMIT_CPU)
    soft = int(cpu_seconds_used(pid) + seconds) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.prlimit(pid, resource.RLIMIT_CPU, (soft, hard))


def request_cpu_budget() -> float:
    return float(CPU_SECONDS_PER_REQUEST * (os.cpu_count() or 1))
