"""‹ 1/3 › on a message that has other versions (Regenerate and Edit keep them: app/core/chat/versions.py).

`VersionsControl` watches the chat session and puts a `VersionNav` in the header of each message that stands
at a place with more than one version; a click swaps the shown turns for another version and reloads the
chat, which then continues from the version shown. Nothing is switched while a reply streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from app.core.chat import versions as chat_versions

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


class VersionNav(QWidget):
    """‹ index/count ›: asks for the neighbouring version of one message."""

    switch_requested = Signal(int, int)  # message id, version index (from 1)

    def __init__(self, message_id: int, place: chat_versions.VersionPlace, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("version_nav")
        self.message_id = message_id
        self.place = place
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        self.previous = QToolButton()
        self.previous.setText("‹")
        self.previous.setAutoRaise(True)
        self.previous.setToolTip("Show the previous version")
        self.label = QLabel(f"{place.index}/{place.count}")
        self.next = QToolButton()
        self.next.setText("›")
        self.next.setAutoRaise(True)
        self.next.setToolTip("Show the next version")
        self.previous.setEnabled(place.index > 1)
        self.next.setEnabled(place.index < place.count)
        self.previous.clicked.connect(lambda: self.switch_requested.emit(message_id, place.index - 1))
        self.next.clicked.connect(lambda: self.switch_requested.emit(message_id, place.index + 1))
        for w in (self.previous, self.label, self.next):
            lay.addWidget(w)


class VersionsControl(QObject):
    """Keeps the message view's ‹1/3› controls in step with the store and switches versions."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.navs: dict[int, VersionNav] = {}
        session = window.session
        # Connected after the window's own handlers, so the message widgets exist when this runs.
        session.conversation_changed.connect(lambda _cid: self.refresh())
        session.message_added.connect(lambda _m: self.refresh())
        session.busy_changed.connect(lambda _b: self.refresh())  # no switching while a reply streams

    def refresh(self) -> None:
        win = self.window
        conv = win.session.conversation
        for nav in self.navs.values():
            try:
                nav.setParent(None)
                nav.deleteLater()
            except RuntimeError:  # its message widget was deleted with it
                pass
        self.navs.clear()
        if conv is None or win.store.closed:
            return
        try:
            places = chat_versions.places(win.store, conv.id)
        except Exception:  # noqa: BLE001 (a damaged store must not take the chat: its versions stay hidden)
            return
        busy = win.session.busy
        for message_id, place in places.items():
            widget = win.message_view.widget_for(message_id)
            if widget is None:
                continue
            nav = VersionNav(message_id, place)
            nav.setEnabled(not busy)
            nav.switch_requested.connect(self.switch)
            header: QHBoxLayout = widget.header
            buttons = widget.edit_button or widget.copy_button  # just before Edit / Copy, wherever the metrics are
            header.insertWidget(max(header.indexOf(buttons), 0), nav)
            self.navs[message_id] = nav

    def switch(self, message_id: int, index: int) -> bool:
        win = self.window
        conv = win.session.conversation
        if conv is None or win.session.busy:
            return False
        if not chat_versions.switch(win.store, conv.id, message_id, index):
            return False
        win.session.open(conv.id)  # reload the view, the dashboard's history and the buttons
        return True
