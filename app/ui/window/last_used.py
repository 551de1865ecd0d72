"""The Library's "Last used" follows the window: a local model counts as used when it loads and when a reply of it
ends, and the Models page (once built) shows the new time at once, without Refresh (it said "never" or an old
time until Refresh). The time is kept in the library's library.json; at a reply's end it is written off the GUI
thread, where the end of a reply already has its own work to draw."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.core.chat.store import Message
from app.core.models import library
from app.ui.toolkit.background import run_in_background

if TYPE_CHECKING:
    from app.ui.window.base import WindowBase


class LastUsed:
    def __init__(self, window: WindowBase) -> None:
        self.window = window
        window.session.message_finished.connect(self._reply_ended)

    def loaded(self, path: str) -> None:
        """A local model loaded (written now: a load is rare and already slow)."""
        try:
            when = library.mark_used(path)
        except OSError:
            return  # "last used" is a nicety; never let it disturb a load
        self._show(path, when)

    def _reply_ended(self, message: Message) -> None:
        info = self.window.engine.loaded_info
        if message.role != "assistant" or not message.metrics or info is None \
                or info.chat_template_source == "server":  # a server's model is no file of the library
            return
        path, when = info.model_path, datetime.now(UTC)
        self._show(path, when)
        # a read-only data folder fails the write, dropped: the row still says it for this session
        run_in_background(self.window, lambda: library.mark_used(path, when), name="last-used")

    def _show(self, path: str, when: datetime) -> None:
        page = self.window.models_page.widget
        if page is not None:
            page.model_used(path, when)  # type: ignore[attr-defined]
