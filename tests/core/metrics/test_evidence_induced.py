"""The slowness causes induced for real and read back from the evidence (app.core.metrics.evidence): a CPU hog
process, and a mapped file whose page cache was dropped (posix_fadvise DONTNEED: no root needed; the file is
fsynced first, since the kernel keeps dirty pages). The assertions read counters (CPU seconds, bytes read
from storage), never compare times. Fewer GPU layers than planned, swap and a CPU clock drop cannot be
induced on a CPU-only machine without swap: tests/core/metrics/test_slowness.py decides them from recorded
readings."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.core.metrics.evidence import between, take_snapshot
from app.core.metrics.slowness import causes, slow_line

HOG = ("import ctypes, ctypes.util\n"
       "ctypes.CDLL(ctypes.util.find_library('c')).prctl(15, b'roofline-hog', 0, 0, 0)\n"  # PR_SET_NAME
       "while True: pass\n")


def _wait_for_cpu(proc: psutil.Process, seconds: float, limit_s: float = 60.0) -> None:
    """Until the process has used `seconds` of CPU (however busy the machine is), at most `limit_s`."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        ct = proc.cpu_times()
        if ct.user + ct.system >= seconds:
            return
        time.sleep(0.05)
    raise AssertionError(f"the hog did not get {seconds} s of CPU in {limit_s} s")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names the hog with prctl (Linux)")
def test_a_cpu_hog_is_named_as_other_load() -> None:
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        proc = psutil.Process(hog.pid)
        end = time.monotonic() + 60
        while proc.name() != "roofline-hog" and time.monotonic() < end:  # started, and named
            time.sleep(0.02)
        before = take_snapshot()
        start = proc.cpu_times().user
        _wait_for_cpu(proc, start + 1.0)
        after = take_snapshot()
    finally:
        hog.kill()
        hog.wait()
    # every other process, not the busiest three: on a shared machine others may be busier than the hog;
    # judged as on a one-core machine, where one busy process is past the half-core threshold
    ev = between(before, after, threads=1, n_cpus=1, top=10_000)
    names = [n for n, _ in ev.top_others]
    assert "roofline-hog" in names
    hog_cores = dict(ev.top_others)["roofline-hog"]
    # the machine's busy time and the hog's own are read a moment apart and counted in clock ticks (10 ms): the
    # two agree to a few ticks, not exactly (0.9956 against 0.996 has been seen)
    slack = 3 / os.sysconf("SC_CLK_TCK") / ev.wall_s
    assert ev.other_cores is not None and ev.other_cores >= min(hog_cores, 1.0) - slack > 0  # capped at one core
    line = slow_line("decode", 2.0, 10.0, ev)
    assert "other processes used" in line and "of 1 CPU cores" in line


def _on_tmpfs(path: Path) -> bool:
    best, fstype = "", ""
    for part in psutil.disk_partitions(all=True):
        if str(path).startswith(part.mountpoint) and len(part.mountpoint) > len(best):
            best, fstype = part.mountpoint, part.fstype
    return fstype in ("tmpfs", "ramfs")


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is POSIX-only")
def test_a_mapped_file_paged_in_is_named(tmp_path: Path) -> None:
    if _on_tmpfs(tmp_path):
        pytest.skip("the temporary directory is in RAM (tmpfs): its pages cannot be dropped")
    path = tmp_path / "weights.bin"
    size = 64 * 2**20
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # the page cache of the file is dropped
    before = take_snapshot(processes=False)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        total = sum(m[i] for i in range(0, size, 4096))  # one byte a page: every page faults in
    after = take_snapshot(processes=False)
    assert total >= 0
    ev = between(before, after, threads=1)
    ev.model_bytes = size
    assert ev.disk_read_bytes is not None and ev.disk_read_bytes >= size // 2
    # the other helpers' load on a shared machine may be a stronger cause; the page-in must be among them
    assert any(c.line.startswith("weights paged in from the mapped model file") and "read from disk" in c.line
               for c in causes(ev))
    ev.other_cores = ev.steal_cores = 0.0  # alone on the machine, it is the one named
    assert "weights paged in" in slow_line("decode", 2.0, 10.0, ev)
    # read again: the pages are cached now, nothing comes from storage
    again = take_snapshot(processes=False)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        sum(m[i] for i in range(0, size, 4096))
    cached = between(again, take_snapshot(processes=False), threads=1)
    assert (cached.disk_read_bytes or 0) < size // 8
