"""Export a chat from the window: a save dialog opened in the folder of the last export (kept in the
settings), then the file written whole (app/core/chat/export.py) in the format its name asks for (the file-type
filter only decides for a name without a known extension); the outcome is one line in the banner."""

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
        window.conversations.export_requested.connect(self.export)

    def start_dir(self) -> Path:
        """The last export's folder while it exists, else the user's documents (or home): never the folder
        the process happened to start in."""
        last = self.window.settings.window.export_dir
        docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
        for candidate in (last, docs):
            if candidate and Path(candidate).is_dir():
                return Path(candidate)
        return Path.home()

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
        start = str(self.start_dir() / chat_export.suggested_name(conv, "md"))
        chosen, selected = QFileDialog.getSaveFileName(win, "Export chat", start, ";;".join(FILTERS.values()))
        if not chosen:
            return None
        path = Path(chosen)
        by_filter = next((f for f, flt in FILTERS.items() if flt == selected), "md")
        fmt = chat_export.format_for(path, by_filter)  # "demo.json" under the Markdown filter is JSON
        if path.suffix.lower() not in chat_export.SUFFIXES:
            path = path.with_name(path.name + "." + fmt)
        try:
            chat_export.write(path, fmt, conv, win.store.messages(conversation_id))
        except OSError as exc:
            line = f"Could not export “{conv.title}” to {path}: {exc.strerror or exc}."
            win.banner.show_message(line)
            return line
        win.settings.window.export_dir = str(path.parent)
        win.save_settings()
        line = f"Exported “{conv.title}” as {chat_export.FORMATS[fmt]} to {path}."
        win.banner.show_message(line, info=True)
        return line
