"""The Models page's Discover tab: the curated instruct models recommended for this machine on top
(app/ui/models_page/discover_picks.py), then search the hub, pick a repository, see each quantization's verdict badge
(full GPU / partial / CPU / won't fit), max context, predicted prefill and decode speed and quality cost —
all read from remote headers before any download — with the recommended one highlighted; download it.

Opening a repository takes two steps: the file list (sizes) shows at once; verdicts and speeds follow once
the headers are read. A result for a repository the user has since left is dropped (`_variants_token`).

What a search or a repository is doing ("searching…", "no GGUF repositories match", a hub error) is said right
under the search field (`search_status`): the page's own status line is at its bottom, below the fold of a
small window, where a user who searched did not see it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.config import paths
from app.core.gguf import remote_header
from app.core.gguf.remote_header import VariantAssessment
from app.core.hub import downloads
from app.core.hub import listing as hub
from app.core.hub.files import destination
from app.core.metrics.phase import fmt_bytes
from app.ui.models_page.discover_picks import RecommendedPicks
from app.ui.models_page.page_base import PageBase, show_status
from app.ui.models_page.table_cells import BadgeDelegate
from app.ui.models_page.tables import SearchModel, VariantModel, make_table
from app.ui.toolkit.wrapped_label import WrappedLabel


class DiscoverTab(PageBase):
    """The Discover tab's widgets and actions (a part of ModelsPage)."""

    search_model: SearchModel
    variant_model: VariantModel
    variant_view: QTableView
    current_repo: hub.RepoVariants | None = None
    _variants_token: object = None

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
        self.search_status = WrappedLabel()  # a long hub error wraps to its whole text
        self.search_status.setTextFormat(Qt.TextFormat.PlainText)  # hub errors are not ours
        self.search_status.hide()  # shown while it has something to say
        self.search_view = make_table(self.search_model)
        self.search_view.horizontalHeader().setStretchLastSection(False)
        self.search_view.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.search_view.selectionModel().currentRowChanged.connect(lambda cur, _prev: self.open_repo_at(cur))
        self.variant_title = QLabel("Pick a repository to see its quantizations.")
        self.variant_title.setWordWrap(True)
        self.variant_view = make_table(self.variant_model)
        self.variant_view.setItemDelegateForColumn(VariantModel.BADGE_COLUMN, BadgeDelegate(self.variant_view))
        self.variant_view.doubleClicked.connect(lambda _i: self.download_selected())
        self.download_btn = QPushButton("Download")
        self.download_btn.clicked.connect(self.download_selected)
        # Disabled, saying why, until a quantization is picked (it did nothing, silently)
        self.variant_view.selectionModel().selectionChanged.connect(lambda *_: self._update_download_button())
        self.variant_model.modelReset.connect(self._update_download_button)
        self._update_download_button()
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.variant_title)
        rl.addWidget(self.variant_view, 1)
        # as tall as its whole text (a word-wrapped QLabel was squeezed at 800x600, its first line cut)
        legend = WrappedLabel("Predictions for this machine from each file's header (read remotely; nothing "
                              "downloaded). Quality: mean KL divergence vs F16 on Llama-3-8B — lower is better; a "
                              "guide, models vary.")
        self.discover_legend = legend  # in the theme's muted colour (ModelsPage.restyle)
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
        search = QWidget()
        sl = QVBoxLayout(search)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.addLayout(top)
        sl.addWidget(self.search_status)
        sl.addWidget(split, 1)
        sl.addWidget(legend)  # under both lists, at the page's width: fewer lines than beside the search list
        # The curated instruct models first: what a new user needs, and all of it works offline.
        self.picks = RecommendedPicks()
        self.picks.download_ready.connect(self._start_planned_download)
        self.picks.assess()
        outer = QSplitter(Qt.Orientation.Vertical)
        outer.addWidget(self.picks)
        outer.addWidget(search)
        outer.setStretchFactor(0, 1)
        outer.setStretchFactor(1, 1)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(0, 0, 0, 0)  # the tab's frame is margin enough: the height goes to the lists
        lay.addWidget(outer, 1)
        return w

    def _start_planned_download(self, task: downloads.VariantTask) -> downloads.Job:
        job = self.manager.add(task)
        self.downloads_model.add(job)
        return job

    # -------------------------------------------------------------- discover actions
    def set_search_status(self, text: str, error: bool = False) -> None:
        """Say what the search or the open repository is doing, under the search field ("" hides the line)."""
        show_status(self.search_status, text, error)
        self.search_status.setVisible(bool(text))

    def search(self) -> None:
        text = self.search_edit.text().strip()
        sort = self.sort_box.currentText()
        self.set_search_status("searching…")
        self.run_task(lambda: hub.search(text, sort=sort), self._show_search,  # type: ignore[arg-type]
                      lambda message: self.set_search_status(message, error=True))

    def _show_search(self, repos: list[hub.RepoSummary]) -> None:
        self.search_model.set_rows(repos)
        self.set_search_status(f"{len(repos)} repositories" if repos else "no GGUF repositories match")

    def open_repo_at(self, index: QModelIndex) -> None:
        repo = self.search_model.row(index)
        if repo is not None:
            self.open_repo(repo.repo_id)

    def open_repo(self, repo_id: str) -> None:
        self.current_repo = None
        self.variant_model.set_rows([])
        self.variant_title.setText(f"<b>{repo_id}</b> — listing files…")
        self._run_for_repo(lambda: hub.list_variants(repo_id), self._show_listing)

    def _assess(self, rv: hub.RepoVariants) -> None:
        self._run_for_repo(lambda: (rv, remote_header.assess_repo(rv)), self._show_variants)

    def selected_variant(self) -> VariantAssessment | None:
        rows = self.variant_view.selectionModel().selectedRows()
        return self.variant_model.row(rows[0]) if rows else None

    def local_copy(self, a: VariantAssessment) -> Path | None:
        """Where this variant of the open repository is in the models folder, if it was downloaded."""
        rv = self.current_repo
        if rv is None or not a.files:
            return None
        try:
            dest = destination(paths.models_dir(), rv.repo_id, a.files[0])
        except ValueError:
            return None
        return dest if dest.is_file() else None

    def mark_downloaded(self) -> None:
        """The open repository's variants already in the models folder: marked in the list; Download on
        one of them becomes Load."""
        rows: list[VariantAssessment] = self.variant_model.rows
        self.variant_model.set_downloaded({a.files[0] for a in rows if self.local_copy(a) is not None})
        self._update_download_button()

    def _update_download_button(self) -> None:
        a = self.selected_variant()
        here = self.local_copy(a) if a is not None else None
        self.download_btn.setEnabled(a is not None)
        self.download_btn.setText("Load" if here is not None else "Download")
        self.download_btn.setToolTip(
            f"Downloaded already ({here}): load it to chat with it" if here is not None else
            "Download the selected quantization into the models folder" if a is not None else
            "Pick a repository, then one of its quantizations, to download it")

    def download_selected(self) -> downloads.Job | None:
        a = self.selected_variant()
        rv = self.current_repo
        if a is None or rv is None:
            return None
        here = self.local_copy(a)
        if here is not None:  # downloaded already: the button says Load
            self.model_chosen.emit(str(here))
            return None
        variant = next((v for v in rv.variants if v.quant == a.quant and v.first.path == a.files[0]), None)
        if variant is None:
            return None
        if a.verdict == "won't fit" and not self.confirm_unfit(a):
            return None
        try:
            task = downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir())
        except downloads.DownloadError as exc:
            self.set_search_status(str(exc), error=True)
            return None
        job = self.manager.add(task)
        self.downloads_model.add(job)
        return job

    def _run_for_repo(self, fn: Callable[[], Any], on_done: Callable[[Any], None]) -> None:
        """Run a step of opening a repository; its result or failure counts only while it is still the
        repository the user is looking at."""
        token = self._variants_token = object()

        def done(result: Any) -> None:
            if token is self._variants_token:
                on_done(result)

        def failed(message: str) -> None:
            if token is self._variants_token:
                self.variant_title.setText(message)
                self.set_search_status(message, error=True)

        self.run_task(fn, done, failed)

    def _show_listing(self, rv: hub.RepoVariants) -> None:
        self.current_repo = rv
        self.variant_model.set_rows([
            VariantAssessment(quant=v.quant, size=v.size, files=[f.path for f in v.files], verdict="…",
                              note="reading the file header…") for v in rv.variants])
        self.variant_title.setText(f"<b>{rv.repo_id}</b> — {len(rv.variants)} quantizations; "
                                   "reading their headers (first megabytes only)…")
        self.mark_downloaded()
        if rv.variants:
            self._assess(rv)

    def _show_variants(self, assessed: tuple[hub.RepoVariants, list[VariantAssessment]]) -> None:
        rv, rows = assessed
        self.current_repo = rv
        self.variant_model.set_rows(rows)
        self.mark_downloaded()
        best = next((r for r in rows if r.recommended), None)
        sentence = str(best.detail.get("sentence", "")) if best else ""
        self.variant_title.setText(
            f"<b>{rv.repo_id}</b> — {len(rows)} quantizations"
            + (f"<br>★ Recommended: <b>{best.quant}</b>. {html.escape(sentence)}" if best else
               "<br>None of these fits this machine."))
        self.set_search_status("")
        if best is not None:
            self.variant_view.selectRow(rows.index(best))

    def confirm_unfit(self, variant: VariantAssessment) -> bool:
        """Ask before downloading something predicted not to fit (tests replace this)."""
        answer = QMessageBox.question(
            self, "Download anyway?",
            f"{variant.quant} ({fmt_bytes(variant.size)}) is not expected to fit in this machine's memory. "
            f"{variant.note}\n\nDownload it anyway?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes
