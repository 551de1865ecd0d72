"""The GUI's download queue: one worker thread runs queued `downloads.download_variant` jobs one at a time,
with pause, resume and cancel, and reports every change through callbacks (the GUI turns them into signals).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core.hub import listing as hub
from app.core.hub.downloads import (
    ACTIVE,
    Control,
    DownloadError,
    DownloadStopped,
    Progress,
    VariantTask,
    download_variant,
    part_path,
    sidecar_path,
)


@dataclass
class Job:
    task: VariantTask
    progress: Progress = field(default_factory=Progress)
    control: Control = field(default_factory=Control)

    @property
    def result(self) -> Path | None:
        """The model file once it is downloaded and verified."""
        return self.task.dest if self.progress.state == "done" else None

    @property
    def id(self) -> str:
        return self.task.id

    def snapshot(self) -> dict[str, Any]:
        p = asdict(self.progress)
        p["eta_s"] = self.progress.eta_s
        return {"id": self.id, "repo_id": self.task.repo_id, "quant": self.task.quant, **p}


class DownloadManager:
    """Runs queued downloads one at a time on a worker thread.

    `on_update(job)` is called from the worker thread on every change; the GUI turns it into a signal.
    """

    def __init__(self, on_update: Callable[[Job], None] | None = None,
                 on_finished: Callable[[Job], None] | None = None):
        self.on_update = on_update or (lambda job: None)
        self.on_finished = on_finished or (lambda job: None)
        self.jobs: list[Job] = []
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._last_emit = 0.0

    def add(self, task: VariantTask) -> Job:
        """Queue a download; the same variant again returns its job (resumed if it was paused or failed),
        so one .part file never has two writers."""
        with self._lock:
            existing = next((j for j in self.jobs if j.id == task.id
                             and j.progress.state not in ("done", "cancelled")), None)
            if existing is None:
                job = Job(task)
                job.progress.total = task.total
                self.jobs.append(job)
                self._ensure_thread()
                self._lock.notify_all()
        if existing is not None:
            if existing.progress.state in ("paused", "failed"):
                self.resume(existing)
            return existing
        self.on_update(job)
        return job

    def pause(self, job: Job) -> None:
        with self._lock:
            if job.progress.state == "queued":
                job.progress.state = "paused"
            elif job.progress.state in ACTIVE:
                job.control.request("paused")
        self.on_update(job)

    def resume(self, job: Job) -> None:
        with self._lock:
            if job.progress.state in ("paused", "failed"):
                job.control = Control()
                job.progress.state = "queued"
                job.progress.message = ""
                self._ensure_thread()
                self._lock.notify_all()
        self.on_update(job)

    def cancel(self, job: Job) -> None:
        with self._lock:
            state = job.progress.state
            if state in ACTIVE:
                job.control.request("cancelled")
            elif state in ("queued", "paused", "failed"):
                job.progress.state = "cancelled"
                for f in job.task.files:
                    part_path(f.dest).unlink(missing_ok=True)
                    sidecar_path(f.dest).unlink(missing_ok=True)
        self.on_update(job)

    def close(self) -> None:
        """Stop the worker; a running download pauses (resumable later)."""
        with self._lock:
            self._closing = True
            for job in self.jobs:
                if job.progress.state in ACTIVE:
                    job.control.request("paused")
            self._lock.notify_all()
        if self._thread:
            self._thread.join(10)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not any(j.progress.state == "queued" or j.progress.state in ACTIVE for j in self.jobs):
                    return True
            time.sleep(0.02)
        return False

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._closing = False
            self._thread = threading.Thread(target=self._run, name="downloads", daemon=True)
            self._thread.start()

    def _next(self) -> Job | None:
        with self._lock:
            while not self._closing:
                for job in self.jobs:
                    if job.progress.state == "queued":
                        job.progress.state = "downloading"
                        return job
                self._lock.wait(0.5)
            return None

    def _emit(self, job: Job) -> None:
        now = time.monotonic()
        if now - self._last_emit >= 0.1 or job.progress.state != "downloading":
            self._last_emit = now
            self.on_update(job)

    def _run(self) -> None:
        while (job := self._next()) is not None:
            job.progress.resumed_from = 0
            try:
                def on_progress(_p: Progress, j: Job = job) -> None:
                    self._emit(j)

                download_variant(job.task, on_progress=on_progress, control=job.control, progress=job.progress)
            except DownloadStopped as stop:
                job.progress.state = stop.reason
                job.progress.speed = 0.0
            except (DownloadError, hub.HubError) as exc:
                job.progress.state = "failed"
                job.progress.message = str(exc)
                job.progress.speed = 0.0
            except Exception as exc:  # noqa: BLE001 - the queue must survive anything one job does
                job.progress.state = "failed"
                job.progress.message = f"{type(exc).__name__}: {exc}"
            self.on_update(job)
            if job.progress.state == "done":
                self.on_finished(job)
