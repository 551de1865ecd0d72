"""Discover's "Recommended for this machine": the curated instruct models (app/core/models/curated.py) with
their fit verdict and predicted speeds here, the best pick marked, and Download.

Everything but Download works offline: the verdicts come from each model's published shape and the cached
machine facts. Download asks the hub for the file's listing (exact size, hash) and hands a planned download to
the Models page (`download_ready`); without a connection it says so in one line and nothing else changes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QAbstractTableModel, QEvent, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyle,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.metrics.phase import fmt_bytes
from app.core.models.curated import CURATED, CuratedFit, CuratedModel, assess_curated, best_pick
from app.ui.toolkit.background import run_in_background

_Index = QModelIndex | QPersistentModelIndex
# one line, so the list keeps its rows in a small window; the why is the line's tooltip
OFFLINE_NOTE = "Verdicts work offline; Download needs the hub."
OFFLINE_WHY = ("Verdicts come from each model's published shape and this machine's measured facts: they work "
               "offline. Download needs a connection to the hub.")


class PicksModel(QAbstractTableModel):
    HEADERS: ClassVar[list[str]] = ["Model", "Size", "Fits here", "Prefill / decode tok/s", "Licence", "Good for"]

    def __init__(self, parent: Any = None):
        super().__init__(parent)
        self.models: list[CuratedModel] = list(CURATED)
        self.fits: dict[str, CuratedFit] = {}
        self.best: str | None = None

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 (Qt signature)
        return 0 if parent.isValid() else len(self.models)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal \
                and 0 <= section < len(self.HEADERS):
            return self.HEADERS[section]
        return None

    def set_fits(self, fits: list[CuratedFit]) -> None:
        self.fits = {f.model.title: f for f in fits}
        pick = best_pick(fits)
        self.best = pick.model.title if pick else None
        if self.models:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.models) - 1, len(self.HEADERS) - 1))

    def model_at(self, index: _Index) -> CuratedModel | None:
        return self.models[index.row()] if index.isValid() and 0 <= index.row() < len(self.models) else None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        m = self.model_at(index)
        if m is None:
            return None
        fit = self.fits.get(m.title)
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return f"★ {m.title} (best pick)" if m.title == self.best else m.title
            if col == 1:
                return f"{fmt_bytes(m.size)} {m.quant}"
            if col == 2:
                return fit.fit.verdict if fit else "…"
            if col == 3:
                return fit.fit.speed_text() if fit else "…"
            if col == 4:
                return m.licence
            if col == 5:
                return m.note
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [f"{m.repo_id} / {m.file}"]
            if fit:
                lines.append(fit.fit.sentence)
            return "\n".join(lines)
        if role == Qt.ItemDataRole.FontRole and m.title == self.best:
            font = QFont()
            font.setBold(True)
            return font
        return None


class RecommendedPicks(QWidget):
    """The curated list with verdicts; `download_ready(task)` carries a `downloads.VariantTask` to start."""

    download_ready = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = PicksModel(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Recommended for this machine</b>: small instruct (chat) models")
        title.setToolTip("The bundled model is a tiny demo base model that only continues text; these are chat models.")
        title.setWordWrap(True)
        lay.addWidget(title)
        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.verticalHeader().hide()
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.view.horizontalHeader().setStretchLastSection(True)
        self.view.doubleClicked.connect(lambda _i: self.download_selected())
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_button())
        lay.addWidget(self.view, 1)
        self._keep_rows_in_view(2)
        # The best pick goes to the top once the list has its size: the verdicts often come while the tab is
        # hidden, and a scroll made then is undone when the list is laid out (it opened a row above the pick)
        self._best_row: int | None = None
        self.view.viewport().installEventFilter(self)
        self.view.verticalScrollBar().actionTriggered.connect(self._user_scrolled)
        row = QHBoxLayout()
        self.status = QLabel(OFFLINE_NOTE)
        self.status.setToolTip(OFFLINE_WHY)
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # hub errors are not ours
        row.addWidget(self.status, 1)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.download_selected)
        row.addWidget(self.download_button)
        lay.addLayout(row)
        self.assessing = False
        self._update_button()

    def _keep_rows_in_view(self, rows: int) -> None:
        """At least `rows` whole rows under the header: squeezed by a small window's splitter, the list showed
        part of one row."""
        view = self.view
        scroll_bar = view.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)  # its columns scroll sideways
        view.setMinimumHeight(view.horizontalHeader().sizeHint().height() + rows * view.verticalHeader()
                              .defaultSectionSize() + scroll_bar + 2 * view.frameWidth())

    def assess(self, machine: Any = None) -> None:
        """Compute the verdicts in the background (cached machine facts only: no measurement, no network)."""
        def work() -> list[CuratedFit]:
            from app.core.models.fit import machine_for_library

            return assess_curated(machine if machine is not None else machine_for_library())

        self.assessing = True
        run_in_background(self, work, self._assessed, self._assess_failed, name="curated-fit")

    def _assessed(self, fits: list[CuratedFit]) -> None:
        self.assessing = False
        self.model.set_fits(fits)
        best = self.model.best
        if best is not None:
            row = next(i for i, m in enumerate(self.model.models) if m.title == best)
            self.view.selectRow(row)
            self._best_row = row
            self._scroll_to_best()

    def _scroll_to_best(self) -> None:
        """The best pick at the top, whole (selecting scrolled it just into view: half a row under the header)."""
        if self._best_row is not None:
            self.view.scrollTo(self.model.index(self._best_row, 0), QAbstractItemView.ScrollHint.PositionAtTop)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.view.viewport() and event.type() in (QEvent.Type.Resize, QEvent.Type.Show):
            self._scroll_to_best()
        return super().eventFilter(watched, event)

    def _user_scrolled(self, _action: int) -> None:
        self._best_row = None  # the user's scrolling wins over a later resize

    def _assess_failed(self, exc: BaseException) -> None:
        self.assessing = False
        self.status.setText(f"No verdicts for this machine: {exc}")

    def selected(self) -> CuratedModel | None:
        rows = self.view.selectionModel().selectedRows()
        return self.model.model_at(rows[0]) if rows else None

    def _update_button(self) -> None:
        self.download_button.setEnabled(self.selected() is not None)
        self.download_button.setToolTip("" if self.selected() else "Select a model in the list first")

    def download_selected(self) -> bool:
        m = self.selected()
        if m is None:
            self.status.setText("Select a model in the list first.")
            return False
        self.status.setText(f"Asking the hub for {m.file}…")
        self.download_button.setEnabled(False)
        run_in_background(self, lambda: plan_download(m), self._planned, self._plan_failed, name="curated-plan")
        return True

    def _planned(self, task: Any) -> None:
        self._update_button()
        self.status.setText(f"Downloading {task.files[0].path} — see Downloads below.")
        self.download_ready.emit(task)

    def _plan_failed(self, exc: BaseException) -> None:
        from app.core.hub import listing as hub

        self._update_button()
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, (hub.HubOffline, hub.HubUnreachable)):
            self.status.setText(f"Download needs a connection to the hub: {why}")
        else:
            self.status.setText(f"Download not started: {why}")


def plan_download(m: CuratedModel) -> Any:
    """The hub's listing of the model's repository, narrowed to the curated file (exact sizes and hashes)."""
    from app.core.config import paths
    from app.core.hub import downloads
    from app.core.hub import listing as hub

    rv = hub.list_variants(m.repo_id)
    variant = next((v for v in rv.variants if v.first.path == m.file), None)
    if variant is None:
        raise hub.HubNotFound(f"{m.repo_id} no longer has {m.file}; search for the model above")
    return downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir())
