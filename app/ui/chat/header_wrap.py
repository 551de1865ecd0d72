"""A message header that wraps: when the name, state, buttons and metrics line do not fit in one row, the
metrics line moves to a row of its own under them, so a narrow chat shows all of it and nothing in the
header is squeezed against the Copy button; in a wide chat it moves back."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QBoxLayout, QHBoxLayout, QLabel, QSizePolicy, QWidget


class HeaderWrap(QObject):
    def __init__(self, frame: QWidget, frame_layout: QBoxLayout, head: QHBoxLayout, movable: QLabel):
        super().__init__(frame)
        self.frame, self.frame_layout, self.head, self.movable = frame, frame_layout, head, movable
        self.row = QHBoxLayout()
        self.row.setContentsMargins(0, 0, 0, 0)
        frame_layout.insertLayout(frame_layout.indexOf(head) + 1, self.row)
        self.wrapped = False
        self._pending = False
        self._one_row_policy = movable.sizePolicy()
        frame.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # A resize, or new text in the header (a label's new size hint asks its parent for a new layout)
        # (getattr: Qt may still filter an event while the Python side of this object is being torn down)
        if (watched is getattr(self, "frame", None) and event.type() in (QEvent.Type.Resize, QEvent.Type.LayoutRequest)
                and not self._pending):
            # Later, not now: moving a widget between layouts while a layout is placing it crashes Qt.
            self._pending = True
            QTimer.singleShot(0, self, self.fit)
        return False

    def one_row_width(self) -> int:
        """What the header needs to show everything in one row, the metrics line whole."""
        widgets = [self._widget_at(i) for i in range(self.head.count())]
        shown = [w for w in widgets if w is not None and not w.isHidden() and w is not self.movable]
        margins = self.head.contentsMargins()
        width = sum(w.sizeHint().width() for w in shown) + margins.left() + margins.right()
        if self.movable.text():  # its width on one line (its size hint is narrower once it wraps)
            doc = QTextDocument()
            doc.setDefaultFont(self.movable.font())
            doc.setDocumentMargin(0)
            doc.setHtml(self.movable.text())
            width += math.ceil(doc.idealWidth()) + self.head.spacing()
        return width + self.head.spacing() * max(len(shown) - 1, 0)

    def available_width(self) -> int:
        margins = self.frame_layout.contentsMargins()
        return self.frame.contentsRect().width() - margins.left() - margins.right()

    def fit(self) -> None:
        self._pending = False
        wrap = bool(self.movable.text()) and self.one_row_width() > self.available_width()
        if wrap == self.wrapped:
            return
        self.wrapped = wrap
        # In its own row the line may wrap at its spaces (" · "), so a very narrow chat still shows all of it.
        self.movable.setWordWrap(wrap)
        if wrap:
            index = self.head.indexOf(self.movable)
            self.head.removeWidget(self.movable)
            # its stretch stays, or the name and state would share the room it leaves
            self.head.insertStretch(max(index, 0), 1)
            policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
            policy.setHeightForWidth(True)  # as tall as its wrapped lines
            self.movable.setSizePolicy(policy)
            self.row.addWidget(self.movable, 1)
        else:
            self.row.removeWidget(self.movable)
            self.movable.setSizePolicy(self._one_row_policy)
            # back beside the name and state, before the buttons (stretching, as it was built), in place of
            # the stretch that kept its room
            for i in range(self.head.count()):
                item = self.head.itemAt(i)
                if item is not None and item.spacerItem() is not None:
                    self.head.takeAt(i)
                    break
            self.head.insertWidget(self._home_index(), self.movable, 1)

    def _home_index(self) -> int:
        last_label = -1
        for i in range(self.head.count()):
            widget = self._widget_at(i)
            if isinstance(widget, QLabel):
                last_label = i
        return last_label + 1

    def _widget_at(self, index: int) -> QWidget | None:
        item = self.head.itemAt(index)
        return item.widget() if item is not None else None
