"""Model downloads: resumable, verified, queued.

A file downloads into `<name>.part` beside a small JSON sidecar `<name>.part.json` that records what it is
(repo, revision, expected size and sha256). Stopping for any reason — pause, Ctrl-C, a dropped connection, the
app or machine going down — leaves both behind, and the next attempt asks the server for the rest with an HTTP
Range request. The bytes are hashed and compared with the hub's LFS sha256 before the file is moved (atomically,
same directory) to its final name: a model in the library is never a partial or corrupt one. A mismatch deletes
the download and says so. A file the hub gives no sha256 for (neither in the listing nor as its ETag) is
refused unless settings allow unverified downloads; then the result says it was not verified.

`download_variant` is the blocking core (used by the CLI); `download_queue.DownloadManager` runs it on one
worker thread with a queue, pause/resume/cancel and progress callbacks (used by the GUI).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.files import atomic_write
from app.core.hub import listing as hub
from app.core.hub.files import (  # noqa: F401 (re-exported: callers use downloads.<name>)
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    PROVENANCE_SUFFIX,
    SIDECAR_SUFFIX,
    ChecksumMismatch,
    DownloadError,
    DownloadStopped,
    InsufficientDisk,
    UnsafeFilename,
    UnverifiedDownload,
    destination,
    part_path,
    provenance_path,
    safe_relpath,
    sidecar_path,
    write_provenance,
)
from app.core.hub.guard import new_folders, refuse_unverified, remove_empty, too_much, unverified_note

CHUNK = 1 << 20
DISK_MARGIN = 64 << 20  # keep this much free beyond the download itself
ACTIVE = ("downloading", "resuming", "verifying")  # states in which the worker is busy with a job


# ---------------------------------------------------------------- progress


@dataclass
class Progress:
    done: int = 0  # bytes on disk for the whole variant
    total: int = 0
    speed: float = 0.0  # bytes/s, smoothed
    file: str = ""
    state: str = "queued"  # queued | resuming | downloading | verifying | done | paused | cancelled | failed
    message: str = ""
    resumed_from: int = 0  # bytes already on disk when this run started

    @property
    def eta_s(self) -> float | None:
        if self.speed <= 0 or self.total <= 0:
            return None
        return max(0.0, (self.total - self.done) / self.speed)

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


class _Speed:
    """Bytes/s over a sliding window of a few seconds: steady enough to read, quick to follow changes."""

    def __init__(self, window: float = 3.0):
        self.window = window
        self.samples: list[tuple[float, int]] = []

    def add(self, total_bytes: int) -> float:
        now = time.monotonic()
        self.samples.append((now, total_bytes))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.pop(0)
        t0, b0 = self.samples[0]
        return (total_bytes - b0) / (now - t0) if now > t0 else 0.0


# ---------------------------------------------------------------- the download itself


@dataclass
class FileTask:
    repo_id: str
    path: str  # in repo
    revision: str
    size: int
    sha256: str | None
    dest: Path


@dataclass
class VariantTask:
    repo_id: str
    quant: str
    revision: str
    files: list[FileTask]
    id: str = ""

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def dest(self) -> Path:
        """The file to load (the first part of a split model)."""
        return self.files[0].dest


def plan(variant: hub.Variant, repo_id: str, revision: str, models_dir: Path) -> VariantTask:
    files = [FileTask(repo_id, f.path, revision, f.size, f.sha256, destination(models_dir, repo_id, f.path))
             for f in variant.files]
    return VariantTask(repo_id=repo_id, quant=variant.quant, revision=revision, files=files,
                       id=f"{repo_id}:{variant.first.path}")


def http_client() -> Any:
    """An httpx client for hub file traffic: timeouts, redirects followed, each request (redirects too)
    checked for https-or-loopback and for offline mode."""
    import httpx2

    def guard(request: httpx2.Request) -> None:
        # Every request, redirects included: https only (loopback excepted), nothing when offline.
        hub.ensure_online()
        hub.check_url_allowed(str(request.url))

    return httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(60.0, connect=10.0),
                         event_hooks={"request": [guard]})


def check_disk(directory: Path, needed: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    if free < needed + DISK_MARGIN:
        from app.core.metrics.phase import fmt_bytes

        raise InsufficientDisk(
            f"not enough disk space in {directory}: the download needs {fmt_bytes(needed)} "
            f"(+{fmt_bytes(DISK_MARGIN)} margin), {fmt_bytes(free)} is free")


def _existing_part(task: FileTask) -> int:
    """Bytes of a previous attempt we can continue from (0 when there is none or it is for another file)."""
    part, side = part_path(task.dest), sidecar_path(task.dest)
    if not part.exists() or not side.exists():
        return 0
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError):
        return 0
    same = (meta.get("repo_id") == task.repo_id and meta.get("path") == task.path
            and meta.get("size") == task.size and meta.get("sha256") == task.sha256)
    size = part.stat().st_size
    return size if same and size <= task.size else 0


def _hash_prefix(path: Path, nbytes: int, stop: threading.Event | None) -> hashlib._Hash:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        left = nbytes
        while left > 0:
            block = fh.read(min(CHUNK * 8, left))
            if not block:
                break
            digest.update(block)
            left -= len(block)
    return digest


def download_file(task: FileTask, *, base_done: int, progress: Progress,
                  on_progress: Callable[[Progress], None] | None = None,
                  control: Control | None = None) -> None:
    """Download one file into place (resuming a .part when there is one), verify it, move it in."""
    created = new_folders(task.dest.parent)
    try:
        _download_file(task, base_done=base_done, progress=progress, on_progress=on_progress, control=control)
    except BaseException:
        if not part_path(task.dest).exists():  # nothing to resume from: no sidecar, no empty folders left
            with contextlib.suppress(OSError):
                sidecar_path(task.dest).unlink(missing_ok=True)
            remove_empty(created)
        raise


def _download_file(task: FileTask, *, base_done: int, progress: Progress,
                   on_progress: Callable[[Progress], None] | None, control: Control | None) -> None:
    import httpx2

    control = control or Control()
    dest = task.dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() and dest.stat().st_size == task.size:
        progress.done = base_done + task.size
        return  # already here (a split part finished in an earlier run)
    part, side = part_path(dest), sidecar_path(dest)
    have = _existing_part(task)
    if have == 0:
        part.unlink(missing_ok=True)
        atomic_write.write_json(side, {
            "repo_id": task.repo_id, "path": task.path, "revision": task.revision, "size": task.size,
            "sha256": task.sha256, "dest": str(dest), "started": datetime.now(UTC).isoformat(),
        })
    check_disk(dest.parent, task.size - have)
    progress.file = task.path
    progress.resumed_from += have
    if have:
        # The hash covers the whole file: re-read what is already here (seconds per GB; say so meanwhile).
        progress.state = "resuming"
        progress.done = base_done + have
        if on_progress:
            on_progress(progress)
    digest = _hash_prefix(part, have, control.stop) if have else hashlib.sha256()
    url = hub.resolve_url(task.repo_id, task.path, task.revision)
    from huggingface_hub.utils import build_hf_headers

    headers = build_hf_headers(token=hub.token(), library_name="roofline")
    headers["Accept-Encoding"] = "identity"
    if have:
        headers["Range"] = f"bytes={have}-"
    speed = _Speed()
    progress.state = "downloading"
    got = have
    try:
        with http_client() as client, client.stream("GET", url, headers=headers) as resp:
            if resp.status_code == 416 and have == task.size:
                pass  # complete already; fall through to verification
            elif resp.status_code == 200 and have:
                # The server ignored our Range: start over rather than append the wrong bytes.
                have = got = 0
                digest = hashlib.sha256()
            elif resp.status_code not in (200, 206):
                raise DownloadError(f"the hub answered HTTP {resp.status_code} for {task.path}")
            if resp.status_code in (200, 206):
                if resp.status_code == 206 and not resp.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
                    raise DownloadError(f"the hub sent the wrong byte range for {task.path}")
                with part.open("ab" if have else "wb") as fh:
                    for chunk in resp.iter_bytes():  # as they arrive: nothing received is lost on a drop
                        if got + len(chunk) > task.size:  # a body longer than listed would fill the disk
                            fh.close()
                            part.unlink(missing_ok=True)
                            side.unlink(missing_ok=True)
                            raise DownloadError(too_much(task.path, task.size))
                        fh.write(chunk)
                        digest.update(chunk)
                        got += len(chunk)
                        progress.done = base_done + got
                        progress.speed = speed.add(progress.done)
                        if on_progress:
                            on_progress(progress)
                        if control.stop.is_set():
                            break
    except httpx2.HTTPError as exc:
        raise hub.HubUnreachable(
            f"the download of {task.path} was interrupted ({type(exc).__name__}: {exc}); "
            f"{got} of {task.size} bytes are kept and the next attempt resumes from there") from exc
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        # The disk filled up after the up-front check (another program wrote to it): stop, keep the part.
        raise InsufficientDisk(
            f"the disk filled up while downloading {task.path} ({exc.strerror}); {got} of {task.size} bytes "
            f"are kept in {part.parent}: free some space and the download resumes from there") from exc
    if control.stop.is_set() and got < task.size:
        if control.reason == "cancelled":
            part.unlink(missing_ok=True)
            side.unlink(missing_ok=True)
        raise DownloadStopped(control.reason or "paused")
    if got != task.size:
        raise DownloadError(f"the download of {task.path} ended early ({got} of {task.size} bytes); "
                            "run it again to resume")
    progress.state = "verifying"
    if on_progress:
        on_progress(progress)
    actual = digest.hexdigest()
    if task.sha256 and actual != task.sha256.lower():
        part.unlink(missing_ok=True)
        side.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"{task.path}: the downloaded file's sha256 {actual[:16]}… does not match the hub's "
            f"{task.sha256[:16]}…; the file was deleted. Try again; if it repeats, the hub copy is broken.")
    os.replace(part, dest)
    side.unlink(missing_ok=True)


class Control:
    """Pause / cancel flag for a running download (checked between chunks)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        self.reason = reason
        self.stop.set()


def hub_sha256(f: FileTask) -> str | None:
    """The file's sha256 as the hub states it in a HEAD response (X-Linked-ETag), when the listing had none."""
    import re as _re

    from huggingface_hub import get_hf_file_metadata

    hub.ensure_online()
    try:
        meta = get_hf_file_metadata(hub.resolve_url(f.repo_id, f.path, f.revision), token=hub.token(),
                                    endpoint=hub.endpoint())
    except Exception as exc:
        raise hub.translate_error(exc, f.path) from exc
    if meta.size is not None and meta.size != f.size:
        raise DownloadError(f"the hub reports {meta.size} bytes for {f.path}, the listing said {f.size}")
    etag = (meta.etag or "").lower()
    return etag if _re.fullmatch(r"[0-9a-f]{64}", etag) else None


def download_variant(task: VariantTask, on_progress: Callable[[Progress], None] | None = None,
                     control: Control | None = None, progress: Progress | None = None) -> Path:
    """Download every file of a variant, verify each, record provenance; return the path to load.

    A file the hub gives no sha256 for is refused (`UnverifiedDownload`) unless settings allow unverified
    downloads; then it is downloaded and `progress.message` says it was not verified."""
    progress = progress or Progress()
    for f in task.files:
        if not f.sha256:
            f.sha256 = hub_sha256(f)
    refuse_unverified(task.files)
    progress.total = task.total
    remaining = sum(f.size - (f.dest.stat().st_size if f.dest.exists() else _existing_part(f)) for f in task.files)
    check_disk(task.dest.parent, max(0, remaining))
    done = 0
    for f in task.files:
        download_file(f, base_done=done, progress=progress, on_progress=on_progress, control=control)
        done += f.size
    progress.done = task.total
    progress.state = "done"
    progress.message = unverified_note(task.files) or ""  # the queue shows it beside "done"
    write_provenance(task.dest, {
        "source": "hub", "repo_id": task.repo_id, "revision": task.revision, "quant": task.quant,
        "verified": all(f.sha256 for f in task.files),
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in task.files],
        "endpoint": hub.endpoint(), "downloaded": datetime.now(UTC).isoformat(),
    })
    if on_progress:
        on_progress(progress)
    return task.dest


def pending_downloads(models_dir: Path) -> list[dict[str, Any]]:
    """Unfinished downloads left by an earlier run (their sidecars), with the bytes already on disk."""
    out = []
    for side in sorted(models_dir.rglob("*" + SIDECAR_SUFFIX)):
        try:
            meta = json.loads(side.read_text())
        except (OSError, ValueError):
            continue
        part = side.with_name(side.name[: -len(".json")])
        meta["have"] = part.stat().st_size if part.exists() else 0
        meta["sidecar"] = str(side)
        out.append(meta)
    return out


def __getattr__(name: str) -> Any:
    # The GUI's queue lives in download_queue (one job per module); old callers still find it here.
    if name in ("DownloadManager", "Job"):
        from app.core.hub import queue as download_queue

        return getattr(download_queue, name)
    raise AttributeError(name)
