"""One thread rule for the engine, the probes and the predictions: llama.cpp's default (physical cores for
decode, logical cores for prompt batches), held to the CPUs the process may run on."""

from __future__ import annotations

import subprocess
import sys

from app.core.predict import bandwidth, rates, threads
from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo, probe_cpu
from app.core.predict.threads import default_threads


def test_the_default_is_held_to_the_cpus_the_process_may_use() -> None:
    laptop = CPUInfo("cpu", "x86_64", 8, 16, [])
    assert (default_threads(laptop), default_threads(laptop, batch=True)) == (8, 16)
    container = CPUInfo("cpu", "x86_64", 8, 16, [], usable_cpus=2)  # e.g. docker --cpuset-cpus 0,1
    assert (default_threads(container), default_threads(container, batch=True)) == (2, 2)
    hw = HardwareInfo(container, 32 * GiB, 30 * GiB, [], False)
    assert rates.threads_for(hw) == (2, 2)  # the predictions are for the threads the engine will start
    assert default_threads(CPUInfo("cpu", "x86_64", None, None, [])) == 1


def test_the_engine_the_probes_and_the_predictions_share_the_rule() -> None:
    from app.engine.llama.worker import load

    assert load.default_threads is default_threads and bandwidth.default_threads is default_threads
    assert rates.default_threads is default_threads


def test_a_process_pinned_to_one_cpu_uses_one_thread() -> None:
    code = ("import os; os.sched_setaffinity(0, {0}); "
            "from app.core.predict.threads import default_threads; "
            "from app.core.predict.hardware import probe_cpu; "
            "print(default_threads(), default_threads(batch=True), probe_cpu().usable_cpus)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["1", "1", "1"]
    assert probe_cpu().usable_cpus == threads.usable_cpus()
