"""The Trash view: deleted chats, newest first, to restore or remove for good (app/core/chat/trash.py)."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.chat import trash as chat_trash
from app.core.chat.store import ChatStore
from app.ui.toolkit.safe_text import tooltip_html


class TrashDialog(QDialog):
    restored = Signal(int)  # conversation id

    def __init__(self, store: ChatStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Trash")
        self.store = store
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"Deleted chats are removed for good after {chat_trash.KEEP_DAYS} days."))
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setMinimumWidth(420)
        lay.addWidget(self.list, 1)
        self.empty_label = QLabel("The trash is empty.")
        lay.addWidget(self.empty_label)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.restore_button = QPushButton("Restore")
        self.restore_button.clicked.connect(self.restore_selected)
        self.empty_button = QPushButton("Empty trash")
        self.empty_button.setToolTip("Remove every chat in the trash for good")
        self.empty_button.clicked.connect(self.empty_trash)
        buttons.addButton(self.restore_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.empty_button, QDialogButtonBox.ButtonRole.DestructiveRole)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.list.itemSelectionChanged.connect(self._update)
        self.reload()

    def reload(self) -> None:
        self.list.clear()
        for conv in chat_trash.trashed(self.store):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(conv.deleted or 0))
            # The date first: a long title is what gets cut ("…", whole on hover), never the date.
            item = QListWidgetItem(f"deleted {when} · {conv.title}")
            item.setToolTip(tooltip_html(f"{conv.title}\ndeleted {when}"))
            item.setData(Qt.ItemDataRole.UserRole, conv.id)
            self.list.addItem(item)
        if self.list.count():  # the first row chosen, not only framed: Restore works at once (Enter, Space)
            self.list.setCurrentRow(0)
        self._update()

    def _update(self) -> None:
        self.empty_label.setVisible(self.list.count() == 0)
        self.empty_button.setEnabled(self.list.count() > 0)
        self.restore_button.setEnabled(bool(self.list.selectedItems()))

    def restore_selected(self) -> None:
        for item in self.list.selectedItems():
            self.restored.emit(int(item.data(Qt.ItemDataRole.UserRole)))
        self.reload()

    def empty_trash(self) -> None:
        chat_trash.empty(self.store)
        self.reload()
