"""A page that builds its real widget the first time it is shown.

The Models and Lab pages scan disks, read headers and start workers; building them only when the user
opens them keeps start-up fast and keeps their background work out of the chat's way. The page scrolls
when the window is smaller than it: a page's minimum size must not become the window's (the Lab kept the
window 644 px high).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget


class LazyPage(QWidget):
    def __init__(self, factory: Callable[[], QWidget], parent: QWidget | None = None):
        super().__init__(parent)
        self._factory = factory
        self.widget: QWidget | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

    def ensure(self) -> QWidget:
        if self.widget is None:
            self.widget = self._factory()
            layout = self.layout()
            assert layout is not None
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setWidget(self.widget)
            layout.addWidget(scroll)
        return self.widget

    def showEvent(self, event: QShowEvent) -> None:  # Qt's name
        self.ensure()
        super().showEvent(event)
