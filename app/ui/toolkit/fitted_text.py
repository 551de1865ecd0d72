"""A read-only rich-text view as tall as its text at the width its layout gives it (height-for-width).

Why not "set my height to the document's height whenever I am resized": that loop (resize -> fit ->
setFixedHeight -> resize) never settled for one reply mixing English and Devanagari at one window width, and
the window overflowed its stack at every start. Here the view only answers the layout's question "how tall
at width w?" (`heightForWidth`, measured on a copy of the document when w is not the current width, cached
per width until the text changes) and asks the layout to ask again when its text changes. Qt's layouts and
the scroll area place it; nothing re-enters a resize from inside a resize. `layout_passes` counts the
measurements, so tests can assert that a resize settles in a bounded number of them.

The view loads nothing by itself: every resource (image, style sheet) resolves to an empty placeholder,
including `data:` URLs and local files (QTextDocument would otherwise read `![x](/dev/zero)` until it runs out
of memory). Links open only on click, only http(s), through the desktop's URL handler; hovering one shows
its real target. A code block's Copy link (`copy:N`) is answered by `copy_requested(N)`.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import QCursor, QDesktopServices, QImage, QTextDocument, QTextOption
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QToolTip, QWidget

from app.ui.chat.code_blocks import COPY_SCHEME
from app.ui.chat.markdown_render import is_web_link
from app.ui.toolkit.safe_text import tooltip_html

MIN_HEIGHT = 18
_CACHE_WIDTHS = 8  # a resize asks for a few widths (with and without the scroll bar)


def _placeholder_image() -> QImage:
    image = QImage(1, 1, QImage.Format.Format_ARGB32)
    image.fill(0)
    return image


class FittedTextView(QTextBrowser):
    STYLE = "QTextBrowser { background: transparent; }"  # its own style sheet (one that replaces it keeps this)
    link_opened = Signal(QUrl)  # after a web link was handed to the desktop (tests, status)
    link_refused = Signal(QUrl)
    copy_requested = Signal(int)  # a code block's Copy link (app/ui/chat/code_blocks.py): its index

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        # Links: never followed inside the view (a file: link would show a local file), never opened by Qt.
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._anchor_clicked)
        self.highlighted.connect(self._show_target)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet(self.STYLE)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._content_changed)
        self._heights: dict[int, int] = {}
        self.layout_passes = 0
        self.resources_refused = 0

    # ------------------------------------------------------------------ height for width
    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        height = self._heights.get(width)
        if height is None:
            height = self._measure(width)
            if len(self._heights) >= _CACHE_WIDTHS:
                self._heights.clear()
            self._heights[width] = height
        return height

    def _measure(self, width: int) -> int:
        self.layout_passes += 1
        frame = 2 * self.frameWidth()
        text_width = float(max(1, width - frame))
        doc = self.document()
        if abs(doc.textWidth() - text_width) < 0.5:
            height = doc.size().height()
        else:  # measure a copy: re-wrapping the shown document would repaint it at a width it does not have
            # (parented here so its resources too come from loadResource below, never from the disk)
            copy = doc.clone(self)
            copy.setTextWidth(text_width)
            height = copy.size().height()
            copy.deleteLater()
        return max(MIN_HEIGHT, math.ceil(height) + frame)

    def sizeHint(self) -> QSize:
        width = self.width() if self.width() > 0 else 200
        return QSize(200, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(40, MIN_HEIGHT)

    def _content_changed(self, *_: object) -> None:
        """New text, or the same text re-wrapped at a new width: the layout must ask again (later, once)."""
        self._heights.clear()
        self.updateGeometry()

    # ------------------------------------------------------------------ resources and links
    def loadResource(self, kind: int, url: QUrl | str) -> object:  # type: ignore[override]
        """Nothing is ever loaded: an empty image or text (not None, or QTextDocument reads the file itself)."""
        self.resources_refused += 1
        if kind == QTextDocument.ResourceType.ImageResource.value or kind == QTextDocument.ResourceType.ImageResource:
            return _placeholder_image()
        return ""

    def _anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME and url.path().isdigit():
            self.copy_requested.emit(int(url.path()))
        elif is_web_link(url.toString()):
            QDesktopServices.openUrl(url)
            self.link_opened.emit(url)
        else:
            self.link_refused.emit(url)

    def _show_target(self, url: QUrl) -> None:
        if url.isEmpty():
            QToolTip.hideText()
            return
        if url.scheme() == COPY_SCHEME:
            QToolTip.showText(QCursor.pos(), "Copy this code to the clipboard", self)
            return
        QToolTip.showText(QCursor.pos(), tooltip_html(url.toString()), self)
