"""Which machine this is, for results that are only valid on the machine that measured them.

Two identities, on purpose:
* `machine_key(cpu, ram_total)`: a short hash of CPU model, architecture, RAM (GiB) and core count; the key of
  the measured-bandwidth and calibration caches, which depend on the memory system as well as the CPU.
* `tuning_machine()`: "CPU model xN OS", readable; the key of the auto-tune store (threads and micro-batch
  depend on the CPU, its cores and the OS scheduler, not on RAM). Results already stored use this form, so it
  stays as it is.
"""

from __future__ import annotations

import hashlib
import os
import platform
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.predict.hardware import CPUInfo


def cpu_name() -> str:
    """The CPU's model name."""
    from app.core.predict.hardware import probe_cpu  # one place reads /proc/cpuinfo (and sysctl on macOS)

    return probe_cpu().model


def machine_key(cpu: CPUInfo, ram_total: int | None) -> str:
    """Stable id of this machine for measurement caches: CPU model + RAM (GiB) + core count."""
    ram_gib = round((ram_total or 0) / 1024**3)
    raw = f"{cpu.model}|{cpu.arch}|{ram_gib}|{cpu.logical_cores}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def tuning_machine() -> str:
    """The same machine for auto-tuning: CPU model, core count, OS (another machine sharing the user dir re-tunes)."""
    return f"{cpu_name()} x{os.cpu_count()} {platform.system()}"
