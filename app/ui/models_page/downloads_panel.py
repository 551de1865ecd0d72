"""The Models page's download list: progress, speed and ETA per file, pause / resume / cancel; downloads left
unfinished by an earlier run show up paused, ready to resume; a finished one is selected, with Load one click
away. The download manager's own thread does the work; its updates reach the table through queued signals."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.config import paths
from app.core.hub import downloads
from app.core.hub import listing as hub
from app.ui.models_page.page_base import PageBase
from app.ui.models_page.table_cells import ProgressDelegate
from app.ui.models_page.tables import DownloadsModel, make_table


class DownloadBridge(QObject):
    """Carries the download manager's callbacks (its thread) to the GUI thread."""

    updated = Signal(str)
    finished = Signal(str)


class DownloadsPanel(PageBase):
    """The download list's widgets and actions (a part of ModelsPage)."""

    def mark_downloaded(self) -> None: ...  # DiscoverTab's: the hub list marks what is here now

    def _build_downloads(self) -> QWidget:
        w = QWidget()
        self.downloads_view = make_table(self.downloads_model)
        self.downloads_view.setItemDelegateForColumn(DownloadsModel.PROGRESS_COLUMN,
                                                     ProgressDelegate(self.downloads_view))
        self.downloads_view.horizontalHeader().setSectionResizeMode(
            DownloadsModel.PROGRESS_COLUMN, QHeaderView.ResizeMode.Stretch)
        self.downloads_view.horizontalHeader().setStretchLastSection(False)
        self.downloads_view.selectionModel().selectionChanged.connect(lambda *_: self._update_download_buttons())
        self.pause_btn = QPushButton("Pause")
        self.pause_btn.clicked.connect(lambda: self._on_job(self.manager.pause))
        self.resume_btn = QPushButton("Resume")
        self.resume_btn.clicked.connect(lambda: self._on_job(self.manager.resume))
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(lambda: self._on_job(self.manager.cancel))
        self.load_btn = QPushButton("Load")  # a finished download, to chat with in one click
        self.load_btn.clicked.connect(self.load_selected_download)
        row = QHBoxLayout()
        row.addWidget(QLabel("Downloads"))
        row.addStretch(1)
        for b in (self.load_btn, self.pause_btn, self.resume_btn, self.cancel_btn):
            row.addWidget(b)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.downloads_view)
        self._update_download_buttons()
        return w

    # -------------------------------------------------------------- download actions
    def selected_job(self) -> downloads.Job | None:
        rows = self.downloads_view.selectionModel().selectedRows()
        return self.downloads_model.job(rows[0]) if rows else None

    def _on_job(self, action: Callable[[downloads.Job], None]) -> None:
        job = self.selected_job()
        if job is not None:
            action(job)
        self._update_download_buttons()

    def _update_download_buttons(self, *_: object) -> None:
        job = self.selected_job()
        state = job.progress.state if job else ""
        self.pause_btn.setEnabled(state in ("queued", "downloading", "resuming"))
        self.resume_btn.setEnabled(state in ("paused", "failed"))
        self.cancel_btn.setEnabled(state in ("queued", "downloading", "resuming", "paused", "failed"))
        done = state == "done" and job is not None and job.task.dest.is_file()
        self.load_btn.setEnabled(done)
        self.load_btn.setToolTip(f"Load {job.task.dest.name} to chat with it" if done and job else
                                 "Select a finished download to load it")

    def load_selected_download(self) -> None:
        job = self.selected_job()
        if job is not None and job.progress.state == "done" and job.task.dest.is_file():
            self.model_chosen.emit(str(job.task.dest))

    def download_finished(self, job_id: str) -> None:
        """A download is complete: it is selected (Load is one click away), the Discover list marks it, and
        the status line says so."""
        for i, job in enumerate(self.downloads_model.jobs):
            if job.id == job_id and job.progress.state == "done":
                if self.selected_job() is None or self.selected_job() is job:
                    self.downloads_view.selectRow(i)
                self.set_status(f"Downloaded {job.task.dest.name}: press Load to chat with it.")
        self.mark_downloaded()
        self._update_download_buttons()

    def _load_pending(self) -> None:
        """Downloads left unfinished by an earlier run show up paused, ready to resume (one row per file)."""
        for meta in downloads.pending_downloads(paths.models_dir()):
            try:
                variant = hub.Variant(quant=hub.quant_from_filename(meta["path"]) or "?",
                                      files=[hub.HubFile(meta["path"], int(meta["size"]), meta.get("sha256"))])
                task = downloads.plan(variant, str(meta["repo_id"]), str(meta["revision"]), paths.models_dir())
            except (KeyError, TypeError, ValueError, downloads.DownloadError):
                continue  # a sidecar we cannot trust is ignored, never acted on
            job = downloads.Job(task)
            job.progress.state = "paused"
            job.progress.total = task.total
            job.progress.done = int(meta.get("have", 0))
            self.manager.jobs.append(job)
            self.downloads_model.add(job)

    def shutdown(self) -> None:
        """Pause running downloads (resumable next start) and stop the worker."""
        self.manager.close()
