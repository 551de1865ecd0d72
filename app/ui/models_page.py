"""Models page: the local library, hub discovery with per-quant fit/speed predictions, downloads, quantizing.

Library tab: every local GGUF with its facts; use, import, remove (asks first), quantize. Discover tab: search
the hub, pick a repo, see each quantization's verdict badge (full GPU / partial / CPU / won't fit), max
context, predicted prefill and decode speed and quality cost — all read from remote headers before any
download — with the recommended one highlighted; download with progress, pause, resume, cancel.

All network and disk work runs on worker threads (`_Task` on QThreadPool, the download manager's thread, the
quantizer's child process); results come back through queued signals. The table models are plain
QAbstractTableModel subclasses (checked with qtmodeltester).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRunnable,
    Qt,
    QThreadPool,
    Signal,
)
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core import downloads, hub, library, paths
from app.core.metrics import fmt_bytes
from app.core.remote_gguf import VariantAssessment
from app.ui import library_columns
from app.ui.quantize_hint import apply_quantize_hint
from app.ui.table_cells import BadgeDelegate, ProgressDelegate, fmt_params, fmt_rate

_Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()

class _TaskSignals(QObject):
    done = Signal(object, object)  # (token, result)
    failed = Signal(object, str)  # (token, message)


class _Task(QRunnable):
    """Run fn() on the thread pool; report on the GUI thread. Errors become a message, never a crash."""

    def __init__(self, fn: Callable[[], Any], token: object, signals: _TaskSignals):
        super().__init__()
        self.fn, self.token, self.signals = fn, token, signals

    def run(self) -> None:
        try:
            result = self.fn()
        except (hub.HubError, downloads.DownloadError, library.LibraryError) as exc:
            self.signals.failed.emit(self.token, str(exc))
        except Exception as exc:  # noqa: BLE001 - show it, keep the app alive
            self.signals.failed.emit(self.token, f"{type(exc).__name__}: {exc}")
        else:
            self.signals.done.emit(self.token, result)


# ---------------------------------------------------------------- table models


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
        self.fits: dict[str, Any] = {}  # path -> app.core.library_fit.LibraryFit

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
                    m.source, m.last_used.strftime("%Y-%m-%d %H:%M") if m.last_used else "never",
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
            return QBrush(QColor("#c5221f"))
        if role == Qt.ItemDataRole.UserRole:
            return str(m.path)
        return None


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
    HEADERS: ClassVar[list[str]] = ["Quant", "Size", "Fit", "Max context", "Prefill tok/s", "Decode tok/s", "Quality (KLD)", "Note"]
    BADGE_COLUMN = 2

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        v: VariantAssessment | None = self.row(index)
        if v is None:
            return None
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if v.error and col >= 2:
                return "header unreadable" if col == 2 else (v.error if col == 7 else "")
            return [
                ("★ " if v.recommended else "") + v.quant + (f"  ({len(v.files)} parts)" if len(v.files) > 1 else ""),
                fmt_bytes(v.size),
                v.verdict,
                f"{v.max_context:,}" if v.max_context else "—",
                fmt_rate(v.prefill_tps) if v.prefill_tps else "—",
                fmt_rate(v.decode_tps) if v.decode_tps else "—",
                f"{v.quality_kld:g}" if v.quality_kld is not None else "—",
                ("recommended · " if v.recommended else "") + v.note,
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


def _table(model: QAbstractTableModel) -> QTableView:
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


# ---------------------------------------------------------------- quantize dialog


class _QuantBridge(QObject):
    progressed = Signal(object)  # (event dict, fraction, bytes, stage)
    finished = Signal(object, str)  # (path or None, message)


class QuantizeDialog(QDialog):
    """Pick a type and output name, run the quantizer with progress; Cancel stops it and deletes the partial."""

    finished_ok = Signal(str)

    def __init__(self, source: Path, parent: QWidget | None = None):
        super().__init__(parent)
        from app.engine.quantize_client import QUANT_CHOICES

        self.setWindowTitle("Quantize model")
        self.setMinimumWidth(520)
        self.source = source
        self.job: Any = None
        self._bridge = _QuantBridge(self)
        self._bridge.progressed.connect(self._on_event)
        self._bridge.finished.connect(self._on_finished)
        form = QFormLayout()
        form.addRow("Source", QLabel(source.name))
        self.type_box = QComboBox()
        self.type_box.addItems(QUANT_CHOICES)
        self.type_box.setCurrentText("Q4_K_M")
        self.type_box.currentTextChanged.connect(self._suggest_name)
        form.addRow("Type", self.type_box)
        self.name_edit = QLineEdit()
        form.addRow("Output", self.name_edit)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox()
        self.start_btn = self.buttons.addButton("Quantize", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_btn = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.start_btn.clicked.connect(self.start)
        self.cancel_btn.clicked.connect(self.cancel)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        self._suggest_name(self.type_box.currentText())

    def _suggest_name(self, qtype: str) -> None:
        import re

        stem = re.sub(r"(?i)[-_.](f32|f16|bf16)$", "", self.source.stem)
        self.name_edit.setText(f"{stem}-{qtype}.gguf")

    def output_path(self) -> Path:
        return paths.models_dir() / "quantized" / self.name_edit.text().strip()

    def start(self) -> None:
        import threading

        from app.engine.quantize_client import QuantizeJob

        out = self.output_path()
        out.parent.mkdir(parents=True, exist_ok=True)
        self.job = QuantizeJob(self.source, out, self.type_box.currentText(),
                               on_event=lambda e, s: self._bridge.progressed.emit(
                                   (e, s.fraction, s.bytes, s.stage, s.predicted_bytes)))
        self.start_btn.setEnabled(False)
        self.type_box.setEnabled(False)
        self.name_edit.setEnabled(False)
        self.status.setText("starting…")
        job, bridge = self.job, self._bridge

        def work() -> None:
            try:
                path = job.run()
            except Exception as exc:  # noqa: BLE001 - any failure is shown in the dialog
                bridge.finished.emit(None, str(exc))
            else:
                bridge.finished.emit(str(path), "")

        threading.Thread(target=work, name="quantize", daemon=True).start()

    def cancel(self) -> None:
        if self.job is not None and self.job.state.stage not in ("done", "failed", "cancelled"):
            self.job.cancel()
            self.status.setText("cancelling…")
        else:
            self.reject()

    def _on_event(self, payload: tuple[dict[str, Any], float, int, str, int]) -> None:
        event, fraction, nbytes, stage, predicted = payload
        self.progress.setValue(int(fraction * 1000))
        if event.get("event") == "verified":
            self.status.setText("the result loaded and generated text: OK")
        elif stage == "verifying":
            self.status.setText("checking that the result loads and generates…")
        else:
            expect = f" of ~{fmt_bytes(predicted)}" if predicted else ""
            self.status.setText(f"{stage}: {fmt_bytes(nbytes)}{expect} written")

    def _on_finished(self, path: str | None, message: str) -> None:
        self.start_btn.setEnabled(False)
        self.cancel_btn.setText("Close")
        if path:
            self.progress.setValue(1000)
            self.status.setText(f"done: {path}")
            self.finished_ok.emit(path)
        else:
            self.status.setText(message)


# ---------------------------------------------------------------- the page


class _DownloadBridge(QObject):
    updated = Signal(str)
    finished = Signal(str)


class ModelsPage(QWidget):
    """Library / Discover tabs with a download list. Emits `model_chosen(path)` when the user picks a model."""

    model_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None, pool: QThreadPool | None = None):
        super().__init__(parent)
        self.pool = pool or QThreadPool.globalInstance()
        self._signals = _TaskSignals(self)
        self._signals.done.connect(self._task_done)
        self._signals.failed.connect(self._task_failed)
        self._busy = 0
        self._variants_token: object = None
        self.current_repo: hub.RepoVariants | None = None

        self.library_model = LibraryModel(self)
        self.search_model = SearchModel(self)
        self.variant_model = VariantModel(self)
        self.downloads_model = DownloadsModel(self)
        self._dl_bridge = _DownloadBridge(self)
        self._dl_bridge.updated.connect(self.downloads_model.refresh)
        self._dl_bridge.updated.connect(self._update_download_buttons)
        self._dl_bridge.finished.connect(lambda _id: self.refresh_library())
        self.manager = downloads.DownloadManager(on_update=lambda job: self._dl_bridge.updated.emit(job.id),
                                                 on_finished=lambda job: self._dl_bridge.finished.emit(job.id))

        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_library(), "Library")
        self.tabs.addTab(self._build_discover(), "Discover")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tabs)
        split.addWidget(self._build_downloads())
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([560, 180])
        self.status = QLabel("")
        self.status.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.addWidget(split)
        lay.addWidget(self.status)
        self._load_pending()
        self.refresh_library()

    # -------------------------------------------------------------- building
    def _build_library(self) -> QWidget:
        w = QWidget()
        self.library_view = _table(self.library_model)
        self.library_view.doubleClicked.connect(lambda _i: self.use_selected())
        self.library_view.selectionModel().selectionChanged.connect(lambda *_: self._update_library_buttons())
        self.use_btn = QPushButton("Use")
        self.use_btn.clicked.connect(self.use_selected)
        self.import_btn = QPushButton("Import…")
        self.import_btn.clicked.connect(self.import_dialog)
        self.quantize_btn = QPushButton("Quantize…")
        self.quantize_btn.clicked.connect(self.quantize_selected)
        self.remove_btn = QPushButton("Remove…")
        self.remove_btn.clicked.connect(self.remove_selected)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh_library)
        row = QHBoxLayout()
        for b in (self.use_btn, self.import_btn, self.quantize_btn, self.remove_btn):
            row.addWidget(b)
        row.addStretch(1)
        self.library_info = QLabel("")
        row.addWidget(self.library_info)
        row.addWidget(refresh)
        lay = QVBoxLayout(w)
        lay.addWidget(self.library_view)
        lay.addLayout(row)
        self._update_library_buttons()
        return w

    def _build_discover(self) -> QWidget:
        w = QWidget()
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search GGUF models on the hub (e.g. qwen 0.5b, llama 3 8b)…")
        self.search_edit.returnPressed.connect(self.search)
        self.sort_box = QComboBox()
        self.sort_box.addItems(["downloads", "likes", "updated"])
        self.search_btn = QPushButton("Search")
        self.search_btn.clicked.connect(self.search)
        top = QHBoxLayout()
        top.addWidget(self.search_edit, 1)
        top.addWidget(QLabel("Sort"))
        top.addWidget(self.sort_box)
        top.addWidget(self.search_btn)
        self.search_view = _table(self.search_model)
        self.search_view.horizontalHeader().setStretchLastSection(False)
        self.search_view.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.search_view.selectionModel().currentRowChanged.connect(lambda cur, _prev: self.open_repo_at(cur))
        self.variant_title = QLabel("Pick a repository to see its quantizations.")
        self.variant_title.setWordWrap(True)
        self.variant_view = _table(self.variant_model)
        self.variant_view.setItemDelegateForColumn(VariantModel.BADGE_COLUMN, BadgeDelegate(self.variant_view))
        self.variant_view.doubleClicked.connect(lambda _i: self.download_selected())
        self.download_btn = QPushButton("Download")
        self.download_btn.clicked.connect(self.download_selected)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.variant_title)
        rl.addWidget(self.variant_view, 1)
        legend = QLabel("Predictions for this machine from each file's header (read remotely; nothing downloaded). "
                        "Quality: mean KL divergence vs F16 on Llama-3-8B — lower is better; a guide, models vary.")
        legend.setWordWrap(True)
        legend.setStyleSheet("color: #80868b")
        rl.addWidget(legend)
        brow = QHBoxLayout()
        brow.addStretch(1)
        brow.addWidget(self.download_btn)
        rl.addLayout(brow)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.search_view)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 5)
        split.setSizes([420, 840])
        lay = QVBoxLayout(w)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        return w

    def _build_downloads(self) -> QWidget:
        w = QWidget()
        self.downloads_view = _table(self.downloads_model)
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
        row = QHBoxLayout()
        row.addWidget(QLabel("Downloads"))
        row.addStretch(1)
        for b in (self.pause_btn, self.resume_btn, self.cancel_btn):
            row.addWidget(b)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.downloads_view)
        self._update_download_buttons()
        return w

    # -------------------------------------------------------------- background plumbing
    def run_task(self, fn: Callable[[], Any], token: object) -> None:
        self._busy += 1
        self.pool.start(_Task(fn, token, self._signals))

    def busy(self) -> bool:
        return self._busy > 0

    def _task_done(self, token: object, result: Any) -> None:
        self._busy -= 1
        kind = token[0] if isinstance(token, tuple) else token
        if kind == "library":
            result, self.library_model.fits = result  # models, and what each means on this machine
            self.library_model.set_rows(result)
            self._update_library_buttons()
            broken = sum(1 for m in result if m.broken)
            self.library_info.setText(f"{len(result)} model{'' if len(result) == 1 else 's'}, {fmt_bytes(sum(m.size for m in result))}"
                                      + (f"; {broken} broken (hover for why)" if broken else ""))
        elif kind == "search":
            self.search_model.set_rows(result)
            self.set_status(f"{len(result)} repositories" if result else "no GGUF repositories match")
        elif kind == "listing":
            if token is not self._variants_token:
                return  # the user moved on to another repo
            self.current_repo = result
            self.variant_model.set_rows([
                VariantAssessment(quant=v.quant, size=v.size, files=[f.path for f in v.files], verdict="…",
                                  note="reading the file header…") for v in result.variants])
            self.variant_title.setText(f"<b>{result.repo_id}</b> — {len(result.variants)} quantizations; "
                                       "reading their headers (first megabytes only)…")
            if result.variants:
                self._assess(result)
        elif kind == "variants":
            if token is not self._variants_token:
                return  # the user moved on to another repo
            rv, rows = result
            self.current_repo = rv
            self.variant_model.set_rows(rows)
            best = next((r for r in rows if r.recommended), None)
            sentence = str(best.detail.get("sentence", "")) if best else ""
            self.variant_title.setText(
                f"<b>{rv.repo_id}</b> — {len(rows)} quantizations"
                + (f"<br>★ Recommended: <b>{best.quant}</b>. {html.escape(sentence)}" if best else
                   "<br>None of these fits this machine."))
            self.set_status("")
            if best is not None:
                self.variant_view.selectRow(rows.index(best))
        elif kind == "removed":
            self.refresh_library()
            self.set_status(f"deleted {len(result)} file(s)")
        elif kind == "imported":
            self.refresh_library()
            self.set_status(f"imported {result.path.name}")

    def _task_failed(self, token: object, message: str) -> None:
        self._busy -= 1
        kind = token[0] if isinstance(token, tuple) else token
        if kind in ("variants", "listing") and token is not self._variants_token:
            return
        if kind in ("variants", "listing"):
            self.variant_title.setText(message)
        self.set_status(message, error=True)

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #c5221f" if error else "")

    # -------------------------------------------------------------- library actions
    def refresh_library(self) -> None:
        self.run_task(library_columns.list_with_fit, "library")

    def selected_local(self) -> library.LocalModel | None:
        rows = self.library_view.selectionModel().selectedRows()
        return self.library_model.row(rows[0]) if rows else None

    def _update_library_buttons(self) -> None:
        m = self.selected_local()
        self.use_btn.setEnabled(bool(m and not m.broken))
        self.remove_btn.setEnabled(bool(m and m.removable))
        apply_quantize_hint(self.quantize_btn, m)  # disabled with the reason for non-F32/F16/BF16 sources

    def use_selected(self) -> None:
        m = self.selected_local()
        if m is not None and not m.broken:
            try:
                library.mark_used(m.path)
            except OSError:
                pass  # a read-only data dir must not stop the user from using the model
            self.model_chosen.emit(str(m.path))

    def confirm_remove(self, model: library.LocalModel) -> bool:
        """Ask the user (tests replace this)."""
        answer = QMessageBox.question(
            self, "Remove model",
            f"Delete {model.path.name} ({fmt_bytes(model.size)}) from disk?\n\n{model.path}",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def confirm_unfit(self, variant: VariantAssessment) -> bool:
        """Ask before downloading something predicted not to fit (tests replace this)."""
        answer = QMessageBox.question(
            self, "Download anyway?",
            f"{variant.quant} ({fmt_bytes(variant.size)}) is not expected to fit in this machine's memory. "
            f"{variant.note}\n\nDownload it anyway?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def remove_selected(self) -> None:
        m = self.selected_local()
        if m is None or not m.removable:
            return
        if not self.confirm_remove(m):
            return
        path = m.path
        self.run_task(lambda: library.remove(path, confirm=True), "removed")

    def import_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Import GGUF model", str(Path.home()), "GGUF models (*.gguf)")
        if not name:
            return
        box = QMessageBox(QMessageBox.Icon.Question, "Import model",
                          f"Copy {Path(name).name} into Roofline's models folder, or link to it where it is?\n"
                          "A link saves disk space; the model disappears from the library if the file moves.",
                          parent=self)
        copy = box.addButton("Copy", QMessageBox.ButtonRole.AcceptRole)
        link = box.addButton("Link", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        if box.clickedButton() in (copy, link):
            self.import_file(name, link=box.clickedButton() is link)

    def import_file(self, name: str, link: bool = False) -> None:
        self.run_task(lambda: library.import_model(name, link=link), "imported")

    def quantize_selected(self) -> QuantizeDialog | None:
        m = self.selected_local()
        if m is None:
            return None
        dlg = QuantizeDialog(m.path, self)
        dlg.finished_ok.connect(lambda _p: self.refresh_library())
        dlg.show()
        return dlg

    # -------------------------------------------------------------- discover actions
    def search(self) -> None:
        text = self.search_edit.text().strip()
        sort = self.sort_box.currentText()
        self.set_status("searching…")
        self.run_task(lambda: hub.search(text, sort=sort), "search")  # type: ignore[arg-type]

    def open_repo_at(self, index: QModelIndex) -> None:
        repo = self.search_model.row(index)
        if repo is not None:
            self.open_repo(repo.repo_id)

    def open_repo(self, repo_id: str) -> None:

        # Two steps: the file list (sizes) shows at once; verdicts and speeds follow once headers are read.
        token = ("listing", repo_id, object())
        self._variants_token = token
        self.current_repo = None
        self.variant_model.set_rows([])
        self.variant_title.setText(f"<b>{repo_id}</b> — listing files…")
        self.run_task(lambda: hub.list_variants(repo_id), token)

    def _assess(self, rv: hub.RepoVariants) -> None:
        from app.core import remote_gguf

        token = ("variants", rv.repo_id, object())
        self._variants_token = token
        self.run_task(lambda: (rv, remote_gguf.assess_repo(rv)), token)

    def selected_variant(self) -> VariantAssessment | None:
        rows = self.variant_view.selectionModel().selectedRows()
        return self.variant_model.row(rows[0]) if rows else None

    def download_selected(self) -> downloads.Job | None:
        a = self.selected_variant()
        rv = self.current_repo
        if a is None or rv is None:
            return None
        variant = next((v for v in rv.variants if v.quant == a.quant and v.first.path == a.files[0]), None)
        if variant is None:
            return None
        if a.verdict == "won't fit" and not self.confirm_unfit(a):
            return None
        try:
            task = downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir())
        except downloads.DownloadError as exc:
            self.set_status(str(exc), error=True)
            return None
        job = self.manager.add(task)
        self.downloads_model.add(job)
        return job

    # -------------------------------------------------------------- downloads
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
