"""The Models page's table models: the local library, hub search results, a repository's quantizations with
their verdicts, and the download list. Plain QAbstractTableModel subclasses (checked with qtmodeltester)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from app.core.gguf.remote_header import VariantAssessment
from app.core.hub import downloads
from app.core.hub import listing as hub
from app.core.metrics.phase import fmt_bytes
from app.core.models import library
from app.ui.models_page import library_columns
from app.ui.models_page.table_cells import fmt_params, fmt_rate
from app.ui.toolkit import theme

_Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()


class _Table(QAbstractTableModel):
    HEADERS: ClassVar[list[str]] = []

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.rows: list[Any] = []

    def rowCount(self, parent: _Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: _Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal \
                and 0 <= section < len(self.HEADERS):
            return self.HEADERS[section]
        return None

    def set_rows(self, rows: list[Any]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def row(self, index: _Index) -> Any:
        return self.rows[index.row()] if index.isValid() and 0 <= index.row() < len(self.rows) else None


class LibraryModel(_Table):
    HEADERS: ClassVar[list[str]] = ["Name", "Arch", "Params", "Quant", "Size", *library_columns.HEADERS, "Context",
                                    "Chat template", "Source", "Last used", "Location / problem"]
    FIT = range(5, 5 + len(library_columns.HEADERS))  # the columns of this machine's verdict and speeds

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.fits: dict[str, Any] = {}  # path -> app.core.models.fit.LibraryFit

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        title = super().headerData(section, orientation, role)
        return two_lines(title) if isinstance(title, str) else title

    def set_last_used(self, path: str, when: datetime) -> None:
        """`path` was used at `when`: its row says so now (the list itself is read again only on Refresh)."""
        target = Path(path).absolute()
        column = self.HEADERS.index("Last used")
        for i, m in enumerate(self.rows):
            if Path(m.path).absolute() == target:
                m.last_used = when
                self.dataChanged.emit(self.index(i, column), self.index(i, column))

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        m: library.LocalModel | None = self.row(index)
        if m is None:
            return None
        col = index.column()
        if col in self.FIT:
            return library_columns.data(self.fits.get(str(m.path)), col - self.FIT.start, role)
        col -= len(self.FIT) if col >= self.FIT.stop else 0
        if role == Qt.ItemDataRole.DisplayRole:
            if m.broken and col == 1:
                return "BROKEN"
            if m.broken and col in (2, 3, 5, 6, 8):
                return ""
            return [m.name, m.architecture, fmt_params(m.n_params), m.quant, fmt_bytes(m.size),
                    f"{m.n_ctx_train:,}" if m.n_ctx_train else "?", "yes" if m.has_chat_template else "no",
                    m.source, _local_time(m.last_used) if m.last_used else "never",
                    f"⚠ {m.broken}" if m.broken else str(m.path)][col]
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [str(m.path)]
            if m.broken:
                lines.append(f"Broken: {m.broken}")
            if m.provenance:
                src = m.provenance.get("repo_id") or m.provenance.get("from") or m.provenance.get("original")
                lines.append(f"From: {src} ({m.provenance.get('source')})")
            return "\n".join(lines)
        if role == Qt.ItemDataRole.ForegroundRole and m.broken:
            return QBrush(QColor(theme.colors().warn))  # read at each paint: a theme switch repaints it
        if role == Qt.ItemDataRole.UserRole:
            return str(m.path)
        return None


def two_lines(title: str, longest: int = 12) -> str:
    """A column title longer than `longest` characters on two lines ("Max context" over "f16 / q8_0 / q4_0"):
    the Library's titles were wider than their columns' contents, and together wider than the page. It breaks
    at the space nearest the middle that keeps an "a / b" together, else just after a "/"."""
    spaces = [i for i, ch in enumerate(title) if ch == " "]
    if len(title) <= longest or not spaces:
        return title
    apart = [i for i in spaces if "/" not in title[i - 1:i + 2]]
    after_slash = [i for i in spaces if title[i - 1] == "/"]
    middle = len(title) // 2
    cut = min(apart or after_slash or spaces, key=lambda i: abs(i - middle))
    return f"{title[:cut]}\n{title[cut + 1:]}"


def _local_time(when: datetime) -> str:
    """A stored time (UTC) as the user's clock shows it."""
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


class SearchModel(_Table):
    HEADERS: ClassVar[list[str]] = ["Repository", "Downloads", "Likes", "Updated"]

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        r: hub.RepoSummary | None = self.row(index)
        if r is None:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return [r.repo_id, f"{r.downloads:,}", f"{r.likes:,}",
                    r.last_modified.strftime("%Y-%m-%d") if r.last_modified else ""][index.column()]
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() in (1, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return r.repo_id
        return None


class VariantModel(_Table):
    HEADERS: ClassVar[list[str]] = ["Quant", "Size", "Fit", "Max context", "Prefill tok/s", "Decode tok/s",
                                    "Quality (KLD)", "Note"]
    BADGE_COLUMN = 2
    downloaded: frozenset[str] = frozenset()  # first-file paths of the variants already in the models folder

    def set_downloaded(self, first_files: set[str]) -> None:
        """Mark these variants as downloaded ("✓", and "downloaded" in their note)."""
        self.downloaded = frozenset(first_files)
        if self.rowCount():
            self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, len(self.HEADERS) - 1))

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        v: VariantAssessment | None = self.row(index)
        if v is None:
            return None
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if v.error and col >= 2:
                return "header unreadable" if col == 2 else (v.error if col == 7 else "")
            here = bool(v.files) and v.files[0] in self.downloaded
            return [
                ("✓ " if here else "") + ("★ " if v.recommended else "") + v.quant
                + (f"  ({len(v.files)} parts)" if len(v.files) > 1 else ""),
                fmt_bytes(v.size),
                v.verdict,
                f"{v.max_context:,}" if v.max_context else "—",
                fmt_rate(v.prefill_tps) if v.prefill_tps else "—",
                fmt_rate(v.decode_tps) if v.decode_tps else "—",
                f"{v.quality_kld:g}" if v.quality_kld is not None else "—",
                ("downloaded · " if here else "") + ("recommended · " if v.recommended else "") + v.note,
            ][col]
        if role == Qt.ItemDataRole.FontRole and v.recommended:
            f = QFont()
            f.setBold(True)
            return f
        if role == Qt.ItemDataRole.BackgroundRole and v.recommended:
            return QBrush(QColor(26, 115, 232, 40))
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (1, 3, 4, 5, 6):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = list(v.files)
            max_ctx = v.detail.get("max_ctx")
            if isinstance(max_ctx, dict) and any(max_ctx.values()):
                lines.append("Max context by KV cache type: "
                             + " · ".join(f"{k} {n:,}" for k, n in max_ctx.items()))
            if v.detail.get("quality"):
                lines.append(str(v.detail["quality"]))
            if v.error:
                lines.append(v.error)
            return "\n".join(lines)
        if role == Qt.ItemDataRole.UserRole:
            return v.verdict
        return None


class DownloadsModel(_Table):
    HEADERS: ClassVar[list[str]] = ["Model", "Progress", "Speed", "ETA", "State"]
    PROGRESS_COLUMN = 1

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.jobs: list[downloads.Job] = []

    def rowCount(self, parent: _Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.jobs)

    def job(self, index: _Index) -> downloads.Job | None:
        return self.jobs[index.row()] if index.isValid() and 0 <= index.row() < len(self.jobs) else None

    def add(self, job: downloads.Job) -> None:
        if job in self.jobs:
            return
        self.beginInsertRows(_ROOT, len(self.jobs), len(self.jobs))
        self.jobs.append(job)
        self.endInsertRows()

    def refresh(self, job_id: str) -> None:
        for i, job in enumerate(self.jobs):
            if job.id == job_id:
                self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.HEADERS) - 1))

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        job = self.job(index)
        if job is None:
            return None
        p = job.progress
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            eta = p.eta_s
            return [
                f"{job.task.repo_id}:{job.task.quant}",
                f"{p.fraction * 100:.0f}%  {fmt_bytes(p.done)} / {fmt_bytes(p.total)}",
                f"{fmt_bytes(p.speed)}/s" if p.state == "downloading" else "",
                f"{int(eta // 60)}:{int(eta % 60):02d}" if eta is not None and p.state == "downloading" else "",
                p.state + (f": {p.message}" if p.message else ""),
            ][col]
        if role == Qt.ItemDataRole.UserRole and col == self.PROGRESS_COLUMN:
            return p.fraction
        if role == Qt.ItemDataRole.ToolTipRole:
            return p.message or str(job.task.dest)
        return None


def make_table(model: QAbstractTableModel) -> QTableView:
    """A read-only, row-selecting table view on `model`, sized to its contents."""
    view = QTableView()
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.verticalHeader().setVisible(False)
    view.horizontalHeader().setStretchLastSection(True)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    return view
