"""The Models page's Library tab: every local GGUF with its facts and what it means on this machine; use,
import (copy or link), remove (asks first), quantize."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QMessageBox, QPushButton, QVBoxLayout, QWidget

from app.core.metrics.phase import fmt_bytes
from app.core.models import library
from app.ui.models_page import library_columns
from app.ui.models_page.column_fit import ColumnFit
from app.ui.models_page.depth_panel import DepthPanel, UsageOf, compute_view
from app.ui.models_page.page_base import PageBase
from app.ui.models_page.quantize_dialog import QuantizeDialog
from app.ui.models_page.quantize_hint import apply_quantize_hint
from app.ui.models_page.tables import LibraryModel, make_table


class LibraryTab(PageBase):
    """The Library tab's widgets and actions (a part of ModelsPage)."""

    library_model: LibraryModel
    usage_of: UsageOf | None = None  # the window's chat store: a model's use (set by the window)
    _details_for: str | None = None

    def _build_library(self) -> QWidget:
        w = QWidget()
        self.library_view = make_table(self.library_model)
        # as wide as the page, never wider: the name takes the spare room; the location, then the name, give
        # up theirs (elided; the row's tooltip has the whole path)
        location = self.library_model.HEADERS.index("Location / problem")
        self.library_columns = ColumnFit(self.library_view, stretch=0, shrink_first=[location, 0])
        self.library_view.doubleClicked.connect(lambda _i: self.use_selected())
        self.library_view.selectionModel().selectionChanged.connect(lambda *_: self._update_library_buttons())
        self.library_view.selectionModel().selectionChanged.connect(lambda *_: self.show_details())
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
        # the actions on one row, the count and Refresh on the next: on one row they were wider than the page
        # at 800x600 with the dashboard shown (the whole page scrolled sideways, Refresh cut at its edge)
        row = QHBoxLayout()
        for b in (self.use_btn, self.import_btn, self.quantize_btn, self.remove_btn):
            row.addWidget(b)
        row.addStretch(1)
        info_row = QHBoxLayout()
        self.library_info = QLabel("")
        info_row.addWidget(self.library_info, 1)
        info_row.addWidget(refresh)
        lay = QVBoxLayout(w)
        lay.addWidget(self.library_view)
        lay.addLayout(row)
        lay.addLayout(info_row)
        self.depth_panel = DepthPanel()
        lay.addWidget(self.depth_panel)
        self._update_library_buttons()
        return w

    # -------------------------------------------------------------- library actions
    def refresh_library(self) -> None:
        self.run_task(library_columns.list_with_fit, self._show_library)

    def _show_library(self, listed: tuple[list[library.LocalModel], dict[str, Any]]) -> None:
        models, self.library_model.fits = listed  # the models, and what each means on this machine
        self.library_model.set_rows(models)
        self._update_library_buttons()
        broken = sum(1 for m in models if m.broken)
        self.library_info.setText(f"{len(models)} model{'' if len(models) == 1 else 's'}, "
                                  f"{fmt_bytes(sum(m.size for m in models))}"
                                  + (f"; {broken} broken (hover for why)" if broken else ""))
        self.library_changed.emit()  # the toolbar's selector lists the same files

    def selected_local(self) -> library.LocalModel | None:
        rows = self.library_view.selectionModel().selectedRows()
        return self.library_model.row(rows[0]) if rows else None

    def _update_library_buttons(self) -> None:
        m = self.selected_local()
        self.use_btn.setEnabled(bool(m and not m.broken))
        self.remove_btn.setEnabled(bool(m and m.removable))
        apply_quantize_hint(self.quantize_btn, m)  # disabled with the reason for non-F32/F16/BF16 sources

    def show_details(self) -> None:
        """The selected model's decode speed by depth and context-from-use line (worked out off the GUI thread)."""
        m = self.selected_local()
        if m is None or m.broken:
            self._details_for = None
            self.depth_panel.show_message("Select a model to see its decode speed as the context fills.")
            return
        path = str(m.path)
        self._details_for = path
        usage = self.usage_of(path) if self.usage_of is not None else None
        self.depth_panel.show_message("Predicting decode speed by context depth…")

        def shown(view: Any) -> None:
            if self._details_for == path:  # still the selected model
                self.depth_panel.show_view(view)

        def failed(message: str) -> None:
            if self._details_for == path:
                self.depth_panel.show_message(f"No depth prediction: {message}")

        self.run_task(lambda: compute_view(path, usage), shown, failed)

    def use_selected(self) -> None:
        m = self.selected_local()
        if m is not None and not m.broken:
            try:
                self.model_used(str(m.path), library.mark_used(m.path))
            except OSError:
                pass  # a read-only data dir must not stop the user from using the model
            self.model_chosen.emit(str(m.path))

    def model_used(self, path: str, when: datetime) -> None:
        """`path` was used at `when` (loaded, chatted with): its "Last used" says so without a Refresh."""
        self.library_model.set_last_used(path, when)

    def confirm_remove(self, model: library.LocalModel) -> bool:
        """Ask the user (tests replace this)."""
        answer = QMessageBox.question(
            self, "Remove model",
            f"Delete {model.path.name} ({fmt_bytes(model.size)}) from disk?\n\n{model.path}",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def remove_selected(self) -> None:
        m = self.selected_local()
        if m is None or not m.removable:
            return
        if not self.confirm_remove(m):
            return
        path = m.path
        self.run_task(lambda: library.remove(path, confirm=True), self._removed)

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
        self.run_task(lambda: library.import_model(name, link=link), self._imported)

    def quantize_selected(self) -> QuantizeDialog | None:
        m = self.selected_local()
        if m is None:
            return None
        dlg = QuantizeDialog(m.path, self)
        dlg.finished_ok.connect(lambda _p: self.refresh_library())
        dlg.show()
        return dlg

    def _removed(self, deleted: list[Path]) -> None:
        self.refresh_library()
        self.set_status(f"deleted {len(deleted)} file(s)")

    def _imported(self, model: library.LocalModel) -> None:
        self.refresh_library()
        self.set_status(f"imported {model.path.name}")
