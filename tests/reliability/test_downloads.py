"""Downloads under bad conditions: a connection that keeps dropping, a process killed mid-transfer, a disk that fills
up halfway. Each still ends in a verified file (or a clean, resumable stop) and never a corrupt model."""

from __future__ import annotations

import errno
import io
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.core.config import paths
from app.core.hub import downloads
from app.core.hub import listing as hub
from hubserver import HubServer, sha256_of
from reliability_plugin import record
from synth_gguf import write_synthetic_gguf

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/Flaky-GGUF"
FILE = "Flaky-F32.gguf"


@pytest.fixture
def flaky_repo(hub_server: HubServer, tmp_path: Path) -> Path:
    src = write_synthetic_gguf(tmp_path / "src.gguf", tensor_type="F32", n_layers=3)  # ~7 MB
    hub_server.state.add_repo(REPO, {FILE: src})
    return src


def _task() -> downloads.VariantTask:
    rv = hub.list_variants(REPO)
    return downloads.plan(rv.variants[0], rv.repo_id, rv.revision, paths.models_dir())


def test_a_download_cut_ten_times_still_completes_and_verifies(hub_server: HubServer, flaky_repo: Path) -> None:
    rng = random.Random(3)
    size = flaky_repo.stat().st_size
    cuts = sorted(rng.sample(range(1, size - 1), 10))
    task = _task()
    for cut in cuts:
        hub_server.state.drop_after[FILE] = cut
        with pytest.raises(hub.HubError, match="resumes from there"):
            downloads.download_variant(task)
        part = downloads.part_path(task.dest)
        assert part.stat().st_size == cut  # every byte received is kept
        assert not task.dest.exists()  # and nothing half-done is ever in the library
        record("download interruptions survived")
    out = downloads.download_variant(_task())
    assert sha256_of(out) == sha256_of(flaky_repo)
    # Each resume asked only for the rest: the server sent the file exactly once in total.
    assert hub_server.state.served(FILE) == size
    ranges = [r for m, p, r in hub_server.state.requests if m == "GET" and p.endswith(FILE)]
    assert ranges == [None] + [f"bytes={c}-" for c in cuts]


_PULL = """
import sys
from app.core.config import paths
from app.core.hub import downloads, listing as hub
rv = hub.list_variants(sys.argv[1])
downloads.download_variant(downloads.plan(rv.variants[0], rv.repo_id, rv.revision, paths.models_dir()))
"""


def test_a_download_process_killed_three_times_resumes_and_verifies(hub_server: HubServer, flaky_repo: Path,
                                                                   tmp_path: Path) -> None:
    hub_server.state.throttle_bps = 6 << 20  # ~1.2 s for the file: time to kill it mid-way
    script = tmp_path / "pull.py"
    script.write_text(_PULL)
    part = downloads.part_path(_task().dest)
    sizes = []
    for _ in range(3):
        before = part.stat().st_size if part.exists() else 0
        proc = subprocess.Popen([sys.executable, str(script), REPO], cwd=ROOT, env=dict(os.environ))
        deadline = time.monotonic() + 30
        while (not part.exists() or part.stat().st_size < before + (512 << 10)) and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        sizes.append(part.stat().st_size)
        assert sizes[-1] > before  # progress was made and kept
        record("download interruptions survived")
    hub_server.state.throttle_bps = None
    out = downloads.download_variant(_task())
    assert sha256_of(out) == sha256_of(flaky_repo)
    assert not part.exists() and not downloads.sidecar_path(out).exists()


class _FullDisk(io.BufferedWriter):
    """A .part file on a disk that has `room` bytes left: writes past it fail with ENOSPC, like the OS does."""

    room = 0

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


def test_a_disk_that_fills_up_mid_download_stops_it_cleanly_and_it_resumes(
        hub_server: HubServer, flaky_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    size = flaky_repo.stat().st_size
    real_open = Path.open

    def open_on_full_disk(self: Path, mode: str = "r", *args: Any, **kw: Any) -> Any:
        fh = real_open(self, mode, *args, **kw)
        if self.name.endswith(".part") and "b" in mode and ("a" in mode or "w" in mode):
            raw = fh.detach()
            return _FullDisk(raw)
        return fh

    _FullDisk.room = size // 2
    monkeypatch.setattr(Path, "open", open_on_full_disk)
    task = _task()
    with pytest.raises(downloads.InsufficientDisk, match="disk") as err:
        downloads.download_variant(task)
    assert "resume" in str(err.value)
    part = downloads.part_path(task.dest)
    assert 0 < part.stat().st_size <= size // 2  # what was written is kept for later
    assert not task.dest.exists()  # no truncated model in the library
    assert downloads.sidecar_path(task.dest).exists()
    record("download interruptions survived")
    # Space is freed: the same download resumes from the kept bytes and verifies.
    monkeypatch.setattr(Path, "open", real_open)
    kept = part.stat().st_size
    progress = downloads.Progress()
    out = downloads.download_variant(_task(), progress=progress)
    assert progress.resumed_from == kept
    assert sha256_of(out) == sha256_of(flaky_repo)


def test_the_download_manager_survives_a_full_disk(hub_server: HubServer, flaky_repo: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """In the GUI's queue the same failure becomes a `failed` job with the reason, and the queue goes on."""
    real_open = Path.open

    def open_on_full_disk(self: Path, mode: str = "r", *args: Any, **kw: Any) -> Any:
        fh = real_open(self, mode, *args, **kw)
        if self.name.endswith(".part") and "b" in mode and ("a" in mode or "w" in mode):
            return _FullDisk(fh.detach())
        return fh

    _FullDisk.room = 1 << 20
    monkeypatch.setattr(Path, "open", open_on_full_disk)
    mgr = downloads.DownloadManager()
    job = mgr.add(_task())
    assert mgr.wait_idle(60)
    assert job.progress.state == "failed" and "disk" in job.progress.message.lower()
    monkeypatch.setattr(Path, "open", real_open)
    mgr.resume(job)
    assert mgr.wait_idle(60)
    assert job.progress.state == "done" and job.result is not None
    assert sha256_of(job.result) == sha256_of(flaky_repo)
    mgr.close()
