"""The Models page: the Library and Discover tabs above the download list, one status line below.

Every part's slow work (listing the library, hub calls, reading remote headers, removing and importing)
runs off the GUI thread through `PageBase.run_task`; downloads run on the download manager's thread and
quantizing in its own child process.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QTabWidget, QVBoxLayout, QWidget

from app.core.hub import downloads
from app.ui.models_page.discover_tab import DiscoverTab
from app.ui.models_page.downloads_panel import DownloadBridge, DownloadsPanel
from app.ui.models_page.library_tab import LibraryTab
from app.ui.models_page.page_base import restyle_status
from app.ui.models_page.tables import DownloadsModel, LibraryModel, SearchModel, VariantModel
from app.ui.toolkit import theme
from app.ui.toolkit.wrapped_label import WrappedLabel


class ModelsPage(LibraryTab, DiscoverTab, DownloadsPanel):
    """Library / Discover tabs with a download list. Emits `model_chosen(path)` when the user picks a model."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._busy = 0
        self._variants_token = None
        self.current_repo = None

        self.library_model = LibraryModel(self)
        self.search_model = SearchModel(self)
        self.variant_model = VariantModel(self)
        self.downloads_model = DownloadsModel(self)
        self._dl_bridge = DownloadBridge(self)
        self._dl_bridge.updated.connect(self.downloads_model.refresh)
        self._dl_bridge.updated.connect(self._update_download_buttons)
        self._dl_bridge.finished.connect(lambda _id: self.refresh_library())
        self._dl_bridge.finished.connect(self.download_finished)  # selected, Load one click away
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
        # (a WrappedLabel: a word-wrapped QLabel here made the page, inside its scroll area, ask for its tables'
        # full heights once the line had text, twice the height of an 800x600 window, the line below the fold)
        self.status = WrappedLabel()
        lay = QVBoxLayout(self)
        lay.addWidget(split)
        lay.addWidget(self.status)
        self._load_pending()
        self.refresh_library()
        self.restyle()

    def restyle(self) -> None:
        """The page's own colours in the theme now: at the start and after View ▸ Theme (the window calls it);
        the tables' colours are read as they paint."""
        restyle_status(self.status)
        restyle_status(self.search_status)
        self.discover_legend.setStyleSheet(f"color: {theme.colors().muted}")
        self.depth_panel.restyle()
