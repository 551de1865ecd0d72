"""A memory cgroup of the test's own (Linux, root): a memory hog and the engine share it, so the hog's pressure
stays inside the test's sandbox — the rest of the machine never feels it — while the engine feels it as on a
laptop whose RAM another program took. With no swap the kernel can only reclaim clean file pages: the engine's
mapped model.

cgroup v1 (a `memory` hierarchy) or v2 (the unified one, with the memory controller): `memory_cgroup()` raises
OSError where neither can be written (not root, a read-only /sys/fs/cgroup), and the test says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


class MemoryCgroup:
    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    def _file(self, v1: str, v2: str) -> Path:
        return self.path / (v2 if self.v2 else v1)

    def add(self, pid: int) -> None:
        self._file("cgroup.procs", "cgroup.procs").write_text(str(pid))

    def set_limit(self, n_bytes: int) -> None:
        self._file("memory.limit_in_bytes", "memory.max").write_text(str(n_bytes))

    def usage(self) -> int:
        return int(self._file("memory.usage_in_bytes", "memory.current").read_text())

    def file_bytes(self) -> int:
        """Page cache charged here (the mapped model's pages, for the engine)."""
        key = "file" if self.v2 else "cache"
        for line in self._file("memory.stat", "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
        return 0

    @contextmanager
    def hog(self, n_bytes: int) -> Iterator[None]:
        """A process in this cgroup holding `n_bytes` of touched memory until the block ends."""
        code = ("import sys, time\n"
                f"data = bytearray({n_bytes})\n"
                "for i in range(0, len(data), 4096): data[i] = 1\n"
                "print('held', flush=True)\n"
                "time.sleep(600)\n")
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda: self.add(os.getpid()))  # in the cgroup before it allocates
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "held":
                raise AssertionError(f"the memory hog did not start (exit {proc.wait(10)})")
            yield
        finally:
            proc.kill()
            proc.wait(10)


def _own_path(controller_line: str) -> str:
    return controller_line.split(":", 2)[2].strip()


@contextmanager
def memory_cgroup() -> Iterator[MemoryCgroup]:
    """A fresh memory cgroup under this process's own, without a limit until `set_limit`; removed after."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    v1 = next((ln for ln in lines if ln.split(":")[1] == "memory"), None)
    if v1 is not None and (ROOT / "memory").is_dir():
        base, v2 = ROOT / "memory" / _own_path(v1).lstrip("/"), False
    else:
        unified = ROOT / "unified" if (ROOT / "unified").is_dir() else ROOT
        own = next(ln for ln in lines if ln.startswith("0::"))
        base, v2 = unified / _own_path(own).lstrip("/"), True
        if "memory" not in (base / "cgroup.subtree_control").read_text().split():
            raise OSError("the memory controller is not enabled for child cgroups here")
    path = base / f"roofline-test-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir()  # OSError where this is not ours to write
    group = MemoryCgroup(path, v2)
    try:
        yield group
    finally:
        for pid in (group.path / "cgroup.procs").read_text().split():
            try:
                (base / "cgroup.procs").write_text(pid)  # whatever is left goes back to the parent
            except OSError:
                pass
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)  # a killed process leaves the cgroup a moment later
