"""Eject and Reload beside the toolbar's model selector (the selector itself: app/ui/model_bar/selector.py).

Eject frees the model's memory and keeps the engine process (a server connection is closed); Reload loads the
chosen model again with the current settings and preset. Both ask before stopping a reply that is streaming.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox, QToolBar

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


class ModelManager(QObject):
    def __init__(self, window: MainWindow, toolbar: QToolBar):
        super().__init__(window)
        self.window = window
        self.eject_action = toolbar.addAction("Eject", self.eject)
        self.eject_action.setToolTip("Unload the model and free its memory")
        self.reload_action = toolbar.addAction("Reload", self.reload)
        self.reload_action.setToolTip("Load the chosen model again, with the current settings and preset")
        window.engine.state_changed.connect(lambda _s: self.update_actions())
        window.engine.loaded.connect(lambda _l: self.update_actions())
        self.update_actions()

    def _model_path(self) -> str | None:
        """The chosen model: the session's (kept through an eject), else the one just loaded."""
        loaded = self.window.engine.loaded_info
        return self.window.session.model_path or (loaded.model_path if loaded else None)

    def update_actions(self) -> None:
        win = self.window
        self.eject_action.setEnabled(win.engine.loaded_info is not None)
        self.reload_action.setEnabled(win.engine.remote is None and bool(self._model_path()))

    def _stop_reply_first(self, what: str) -> bool:
        """True when nothing streams, or the user agrees to stop the reply (then it is stopped)."""
        session = self.window.session
        if not session.busy:
            return True
        box = QMessageBox(QMessageBox.Icon.Question, what, f"A reply is being written. Stop it and {what.lower()}?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self.window)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        if box.exec() != QMessageBox.StandardButton.Yes:
            return False
        session.stop()
        return True

    def eject(self) -> bool:
        win = self.window
        if win.engine.loaded_info is None or not self._stop_reply_first("Eject the model"):
            return False
        win.engine.unload()
        win.model_info.setText("no model loaded: choose one, or Reload")
        win._update_buttons()
        return True

    def reload(self) -> bool:
        win = self.window
        path = self._model_path()
        if not path or win.engine.remote is not None or not self._stop_reply_first("Reload the model"):
            return False
        win.load_model(Path(path))
        return True
