"""The suite's predictions hold on a busy machine: no test reads a live bandwidth, compute or memory figure.

A sub-run of the prediction tests with a planted busy machine: the load average far above the core count (so
`get_bandwidth` would measure again on every call) and a bandwidth probe whose timings jitter. The recorded
machine of conftest.py must keep every such test deterministic; without it, a test that computes a prediction
twice sees two machines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BUSY_MACHINE = '''
import os
import random
import time

import app.core.predict.bandwidth as bandwidth

os.getloadavg = lambda: (64.0, 64.0, 64.0)


class _JitteryClock:
    """time as the probe sees it on a machine that other work keeps interrupting."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def perf_counter():
        return time.perf_counter() + random.random() * 0.05


bandwidth.time = _JitteryClock()
'''

PREDICTION_TESTS = [
    "tests/cli/test_sweep_batch.py::test_the_prediction_is_for_the_sweeps_thread_count",
    "tests/core/predict/test_recommend_cases.py",
    "tests/core/predict/test_speculative_speedup.py",
]


def test_prediction_tests_agree_on_a_busy_machine(tmp_path: Path) -> None:
    (tmp_path / "busy_machine.py").write_text(BUSY_MACHINE)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "busy_machine", "-p", "no:cacheprovider",
                          "-x", *PREDICTION_TESTS], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
