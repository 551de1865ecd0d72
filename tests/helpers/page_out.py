"""Evicting a running process's mapped file from memory (Linux, root or CAP_SYS_NICE): process_madvise with
MADV_PAGEOUT over every mapping of the file in /proc/PID/maps. posix_fadvise(DONTNEED) and drop_caches leave
pages that a process has mapped alone, and llama.cpp maps a model with MAP_POPULATE (read in at load): so a
test that wants the weights read from storage during a reply pages them out of the engine itself."""

from __future__ import annotations

import ctypes
import os

SYS_PIDFD_OPEN = 434
SYS_PROCESS_MADVISE = 440
MADV_PAGEOUT = 21


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def page_out(pid: int, path: str) -> int:
    """Bytes of `path`'s mappings in process `pid` advised out (raises OSError where the kernel refuses)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    done = 0
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].strip() == path:
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    iov = _IoVec(lo, hi - lo)
                    n = libc.syscall(SYS_PROCESS_MADVISE, pidfd, ctypes.byref(iov), 1, MADV_PAGEOUT, 0)
                    if n < 0:
                        raise OSError(ctypes.get_errno(), "process_madvise")
                    done += n
    finally:
        os.close(pidfd)
    return done
