"""Conversation list: a list model over the chat store and the side panel (new, search, rename, delete with
Undo, the trash, export).

Deleting asks nothing: the chat goes to the trash and a bar under the list offers Undo (Ctrl+Z) for a while;
the Trash… button lists deleted chats to restore or remove for good. A question before a delete that can be
undone only teaches people to press Enter through it."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.chat import trash as chat_trash
from app.core.chat.store import ChatStore, Conversation
from app.ui.toolkit.elided_part_label import ElidedPartLabel
from app.ui.toolkit.safe_text import tooltip_html


def elided(text: str, chars: int) -> str:
    """`text`, cut to `chars` characters with "…" where it is longer."""
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


ConversationIdRole = Qt.ItemDataRole.UserRole + 1
Index = QModelIndex | QPersistentModelIndex


class ConversationListModel(QAbstractListModel):
    """Conversations, newest activity first, filtered by a search string. Titles are editable (rename)."""

    def __init__(self, store: ChatStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = store
        self._items: list[Conversation] = []
        self._search = ""
        self.reload()

    def reload(self) -> None:
        self.beginResetModel()
        self._items = self.store.list_conversations(self._search)
        self.endResetModel()

    def set_search(self, text: str) -> None:
        self._search = text
        self.reload()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt signature)
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        conv = self._items[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return conv.title
        if role == Qt.ItemDataRole.ToolTipRole:
            # Titles come from message text: escaped, or a tooltip would render HTML in them.
            return tooltip_html(f"{conv.title}\nlast activity "
                                f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(conv.updated))}")
        if role == ConversationIdRole:
            return conv.id
        return None

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.EditRole or not index.isValid() or not isinstance(value, str):
            return False
        conv = self._items[index.row()]
        self.store.rename_conversation(conv.id, value)
        conv.title = value.strip() or "Untitled"
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole])
        return True

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEditable

    def row_of(self, conversation_id: int) -> int:
        for i, c in enumerate(self._items):
            if c.id == conversation_id:
                return i
        return -1


class ConversationPanel(QWidget):
    open_requested = Signal(int)
    new_requested = Signal()
    deleted = Signal(int)
    restored = Signal(int)  # Undo or the Trash view brought a chat back
    export_requested = Signal(int)
    UNDO_SECONDS = 12

    def __init__(self, store: ChatStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = store
        self.model = ConversationListModel(store, self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.new_button = QPushButton("New chat")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        lay.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.model.set_search)
        lay.addWidget(self.search)
        self.view = QListView()
        self.view.setModel(self.model)
        # A long title ends in "…" (whole on hover), never a sideways scroll bar under the list.
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._menu)
        self.view.clicked.connect(self._clicked)
        self.view.activated.connect(self._clicked)
        lay.addWidget(self.view, 1)
        self.no_matches = QLabel("")  # an empty list after a search must not look like lost chats
        self.no_matches.setWordWrap(True)
        self.no_matches.hide()
        lay.addWidget(self.no_matches)
        self.search.textChanged.connect(self._show_search_state)
        self.undo_bar = QFrame()  # "Chat deleted — Undo", for UNDO_SECONDS after a delete
        bar = QHBoxLayout(self.undo_bar)
        bar.setContentsMargins(0, 0, 0, 0)
        # However long the title, the bar takes the sidebar's width, never widens it: the title is cut,
        # never "deleted" or the Undo button (plain text: the title is message text)
        self.undo_label = ElidedPartLabel()
        bar.addWidget(self.undo_label, 1)
        self.undo_button = QPushButton("Undo")
        self.undo_button.setToolTip("Bring the deleted chat back (Ctrl+Z)")
        self.undo_button.clicked.connect(self.undo_delete)
        # as wide as its word: the style's 80 px minimum took a third of a narrow sidebar's bar from the title
        self.undo_button.setFixedWidth(self.undo_button.fontMetrics().horizontalAdvance("Undo") + 24)
        bar.addWidget(self.undo_button)
        self.undo_bar.hide()
        lay.addWidget(self.undo_bar)
        self._undo_id: int | None = None
        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.timeout.connect(self.undo_bar.hide)
        self.trash_button = QToolButton()
        self.trash_button.setText("Trash…")
        self.trash_button.setAutoRaise(True)
        self.trash_button.setToolTip(f"Deleted chats: restore them or remove them for good (emptied after "
                                     f"{chat_trash.KEEP_DAYS} days)")
        self.trash_button.clicked.connect(self.open_trash)
        lay.addWidget(self.trash_button, 0, Qt.AlignmentFlag.AlignLeft)
        rename = QAction("Rename", self.view)
        rename.setShortcut(QKeySequence(Qt.Key.Key_F2))
        rename.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        rename.triggered.connect(self.rename_current)
        delete = QAction("Delete", self.view)
        delete.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete.triggered.connect(self.delete_current)
        undo = QAction("Undo delete", self.view)
        undo.setShortcut(QKeySequence(QKeySequence.StandardKey.Undo))
        undo.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        undo.triggered.connect(self.undo_delete)
        export = QAction("Export…", self.view)
        export.triggered.connect(self.export_current)
        self.view.addActions([rename, delete, undo])
        self._rename_action, self._delete_action, self._export_action = rename, delete, export

    def _show_search_state(self, text: str) -> None:
        empty = bool(text.strip()) and self.model.rowCount() == 0
        self.no_matches.setText(f"No chats match “{text.strip()}”." if empty else "")
        self.no_matches.setVisible(empty)

    def _clicked(self, index: QModelIndex) -> None:
        cid = index.data(ConversationIdRole)
        if cid is not None:
            self.open_requested.emit(int(cid))

    def _menu(self, pos: Any) -> None:
        if not self.view.indexAt(pos).isValid():
            return
        self.view.setCurrentIndex(self.view.indexAt(pos))
        menu = QMenu(self)
        menu.addAction(self._rename_action)
        menu.addAction(self._export_action)
        menu.addAction(self._delete_action)
        menu.exec(self.view.viewport().mapToGlobal(pos))

    def rename_current(self) -> None:
        index = self.view.currentIndex()
        if index.isValid():
            self.view.edit(index)

    def delete_current(self) -> None:
        index = self.view.currentIndex()
        if not index.isValid():
            return
        cid, title = int(index.data(ConversationIdRole)), str(index.data())
        self.store.delete_conversation(cid)  # to the trash
        self.model.reload()
        self._undo_id = cid
        self.undo_label.set_parts("“", title, "” deleted")
        self.undo_label.setToolTip(tooltip_html(f"“{title}” deleted: Undo brings it back"))
        self.undo_bar.show()
        self._undo_timer.start(self.UNDO_SECONDS * 1000)
        self.deleted.emit(cid)

    def undo_delete(self) -> None:
        if self._undo_id is None or self.undo_bar.isHidden():  # the offer ran out: the Trash view still has it
            return
        cid, self._undo_id = self._undo_id, None
        self.undo_bar.hide()
        self._restore(cid)

    def _restore(self, conversation_id: int) -> None:
        chat_trash.restore(self.store, conversation_id)
        self._withdraw_stale_undo()
        self.model.reload()
        self.select(conversation_id)
        self.restored.emit(conversation_id)

    def _withdraw_stale_undo(self) -> None:
        """The Undo bar goes once its chat has left the trash another way (restored or removed for good from
        the Trash view): its Undo would bring back nothing, or a chat that is no longer there."""
        if self._undo_id is None or any(c.id == self._undo_id for c in chat_trash.trashed(self.store)):
            return
        self._undo_id = None
        self._undo_timer.stop()
        self.undo_bar.hide()

    def open_trash(self) -> None:
        from app.ui.chat.trash_dialog import TrashDialog

        dialog = TrashDialog(self.store, self)
        dialog.restored.connect(self._restore)
        dialog.exec()
        self._withdraw_stale_undo()  # after Empty trash

    def export_current(self) -> None:
        index = self.view.currentIndex()
        if index.isValid():
            self.export_requested.emit(int(index.data(ConversationIdRole)))

    def select(self, conversation_id: int) -> None:
        row = self.model.row_of(conversation_id)
        if row >= 0:
            self.view.setCurrentIndex(self.model.index(row))

    def reload(self, keep: int | None = None) -> None:
        self.model.reload()
        if keep is not None:
            self.select(keep)
