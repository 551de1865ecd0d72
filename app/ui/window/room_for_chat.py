"""Keeps the side panels from taking the chat's room when the window gets narrower. A dock and a splitter's
fixed side keep their widths when the window shrinks, so at 800 px a dashboard and sidebar sized for 1600 px
left the chat a column at its minimum. When the window gets narrower, the dock is narrowed to `DOCK_SHARE`
of the window and the sidebar to `SIDEBAR_SHARE` (never below their minimums) if they are wider; widening
the window, or dragging a panel wider, is left alone."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow, QSplitter

DOCK_SHARE = 0.32
SIDEBAR_SHARE = 0.25


class RoomForChat(QObject):
    def __init__(self, window: QMainWindow, dock: QDockWidget, split: QSplitter):
        super().__init__(window)
        self.window, self.dock, self.split = window, dock, split  # split: [sidebar, chat]
        self._pending = False
        self._last_width = window.width()
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched is getattr(self, "window", None) and event.type() == QEvent.Type.Resize
                and not self._pending):
            self._pending = True
            QTimer.singleShot(0, self, self.fit)  # after the window's own layout has placed the panels
        return False

    def fit(self) -> None:
        self._pending = False
        width = self.window.width()
        narrower, self._last_width = width < self._last_width, width
        if not narrower:
            return
        dock = self.dock
        if dock.isVisible() and not dock.isFloating() and dock.width() > DOCK_SHARE * width:
            target = max(dock.minimumWidth(), int(DOCK_SHARE * width))
            self.window.resizeDocks([dock], [target], Qt.Orientation.Horizontal)
        sizes = self.split.sizes()
        sidebar = self.split.widget(0)
        if len(sizes) == 2 and sidebar is not None and sizes[0] > SIDEBAR_SHARE * width:
            left = max(sidebar.minimumSizeHint().width(), sidebar.minimumWidth(), int(SIDEBAR_SHARE * width))
            self.split.setSizes([left, sizes[0] + sizes[1] - left])
