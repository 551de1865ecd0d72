"""Keeps the side panels from taking the chat's room when the window gets narrower, and gives it back when it
gets wider. A dock and a splitter's fixed side keep their widths when the window shrinks, so at 800 px a
dashboard and sidebar sized for 1600 px left the chat a column at its minimum. When the window gets
narrower, the dock is narrowed to `DOCK_SHARE` of the window and the sidebar to `SIDEBAR_SHARE` (never below
their minimums) if they are wider; when it gets wider again, each goes back to the width it had before, as far
as `RESTORE_SHARE` of the window allows. (The toolbar's model line gives up its least important parts before
it pushes the Dashboard and Settings buttons into the toolbar's overflow menu: app/ui/toolkit/whole_parts_label.py.)"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow, QSplitter

DOCK_SHARE = 0.32
SIDEBAR_SHARE = 0.25
RESTORE_SHARE = 0.4


class RoomForChat(QObject):
    def __init__(self, window: QMainWindow, dock: QDockWidget, split: QSplitter):
        super().__init__(window)
        self.window, self.dock, self.split = window, dock, split  # split: [sidebar, chat]
        self._pending = False
        self._last_width = window.width()
        self._dock_before: int | None = None  # widths before an automatic narrowing
        self._sidebar_before: int | None = None
        # The panels' widths as last set at this window width (by the user or by us): Qt's own layout already
        # narrows a dock before `fit` runs, so the width to go back to has to be known beforehand.
        self._dock_width = dock.width()
        self._sidebar_width = split.sizes()[0] if split.count() else 0
        window.installEventFilter(self)
        dock.installEventFilter(self)
        sidebar = split.widget(0)
        if sidebar is not None:
            sidebar.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        window = getattr(self, "window", None)  # (None while the Python side is torn down)
        if window is None or event.type() != QEvent.Type.Resize:
            return False
        if watched is window:
            if not self._pending:
                self._pending = True
                QTimer.singleShot(0, self, self.fit)  # after the window's own layout has placed the panels
        elif window.width() == self._last_width:  # a panel dragged, the window unchanged: remember it
            self._remember()
        return False

    def _remember(self) -> None:
        self._dock_width = self.dock.width()
        sizes = self.split.sizes()
        self._sidebar_width = sizes[0] if sizes else 0

    def fit(self) -> None:
        self._pending = False
        width = self.window.width()
        if width < self._last_width:
            self._narrower(width)
        elif width > self._last_width:
            self._wider(width)
        self._last_width = width
        self._remember()

    def _dock_docked(self) -> bool:
        return self.dock.isVisible() and not self.dock.isFloating()

    def _narrower(self, width: int) -> None:
        dock = self.dock
        if self._dock_docked() and dock.width() > DOCK_SHARE * width:
            self._dock_before = self._dock_before or self._dock_width
            target = max(dock.minimumWidth(), int(DOCK_SHARE * width))
            self.window.resizeDocks([dock], [target], Qt.Orientation.Horizontal)
        sizes = self.split.sizes()
        sidebar = self.split.widget(0)
        if len(sizes) == 2 and sidebar is not None and sizes[0] > SIDEBAR_SHARE * width:
            self._sidebar_before = self._sidebar_before or self._sidebar_width
            left = max(sidebar.minimumSizeHint().width(), sidebar.minimumWidth(), int(SIDEBAR_SHARE * width))
            self.split.setSizes([left, sizes[0] + sizes[1] - left])

    def _wider(self, width: int) -> None:
        if self._dock_before is not None and self._dock_docked():
            target = min(self._dock_before, int(RESTORE_SHARE * width))
            if target > self.dock.width():
                self.window.resizeDocks([self.dock], [target], Qt.Orientation.Horizontal)
            if target == self._dock_before:
                self._dock_before = None
        sizes = self.split.sizes()
        if self._sidebar_before is not None and len(sizes) == 2:
            left = min(self._sidebar_before, int(SIDEBAR_SHARE * width))
            if left > sizes[0]:
                self.split.setSizes([left, sizes[0] + sizes[1] - left])
            if left == self._sidebar_before:
                self._sidebar_before = None
