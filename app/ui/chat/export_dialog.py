"""Export a chat from the window: a save dialog (Markdown or JSON, by the filter or the file's extension),
then the file written whole (app/core/chat/export.py); the outcome is one line in the banner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QStandardPaths
from PySide6.QtWidgets import QFileDialog

from app.core.chat import export as chat_export

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

FILTERS = {"md": "Markdown (*.md)", "json": "JSON with metrics (*.json)"}


class ExportControl(QObject):
    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.last_dir = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
        window.conversations.export_requested.connect(self.export)

    def export_current(self) -> str | None:
        """Export the chat on screen (a File menu's Export…)."""
        conv = self.window.session.conversation
        return self.export(conv.id) if conv is not None else None

    def export(self, conversation_id: int) -> str | None:
        """Ask where, write, and say how it went. Returns the line shown, or None when cancelled."""
        win = self.window
        conv = win.store.conversation(conversation_id)
        if conv is None:
            return None
        start = str(Path(self.last_dir or ".") / chat_export.suggested_name(conv, "md"))
        chosen, selected = QFileDialog.getSaveFileName(win, "Export chat", start, ";;".join(FILTERS.values()))
        if not chosen:
            return None
        path = Path(chosen)
        fmt = next((f for f, flt in FILTERS.items() if flt == selected), chat_export.format_for(path))
        if path.suffix.lower() not in (".md", ".json", ".markdown", ".txt"):
            path = path.with_name(path.name + "." + fmt)
        try:
            chat_export.write(path, fmt, conv, win.store.messages(conversation_id))
        except OSError as exc:
            line = f"Could not export “{conv.title}” to {path}: {exc.strerror or exc}."
            win.banner.show_message(line)
            return line
        self.last_dir = str(path.parent)
        line = f"Exported “{conv.title}” as {chat_export.FORMATS[fmt]} to {path}."
        win.banner.show_message(line, info=True)
        return line
