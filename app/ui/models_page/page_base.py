"""What the Models page's parts share: the status line, and background tasks whose results come back on the
GUI thread (`app.ui.toolkit.background.run_in_background`, so a result that arrives after the page is gone is dropped).

The page is one widget assembled from parts (library tab, discover tab, downloads panel), each a mixin on
this base; the attributes below are the ones a part uses from another, declared here for the type checker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QWidget

from app.core.hub import downloads
from app.core.hub import listing as hub
from app.core.models import library
from app.ui.models_page.tables import DownloadsModel
from app.ui.toolkit import theme
from app.ui.toolkit.background import run_in_background

# Failures whose message is already written for the user; anything else is shown with its type.
_USER_FACING = (hub.HubError, downloads.DownloadError, library.LibraryError)


def failure_message(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, _USER_FACING) else f"{type(exc).__name__}: {exc}"


class PageBase(QWidget):
    """The Models page's shared plumbing, under its parts (see the module docstring)."""

    model_chosen = Signal(str)  # the user picked a local model to chat with
    library_changed = Signal()  # the Library was listed again (a download, quantize, import, removal, Refresh)

    status: QLabel
    manager: downloads.DownloadManager
    downloads_model: DownloadsModel
    _busy: int = 0

    def run_task(self, fn: Callable[[], Any], on_done: Callable[[Any], None],
                 on_failed: Callable[[str], None] | None = None) -> None:
        """Run `fn()` off the GUI thread; `on_done(result)` on the GUI thread, or `on_failed(message)` (by
        default the message goes to the status line). Errors become a message, never a crash."""
        self._busy += 1

        def done(result: Any) -> None:
            self._busy -= 1
            on_done(result)

        def failed(exc: BaseException) -> None:
            self._busy -= 1
            message = failure_message(exc)
            if on_failed is not None:
                on_failed(message)
            else:
                self.set_status(message, error=True)

        run_in_background(self, fn, done, failed, name="models-page")

    def busy(self) -> bool:
        return self._busy > 0

    def set_status(self, text: str, error: bool = False) -> None:
        show_status(self.status, text, error)


def show_status(label: QLabel, text: str, error: bool = False) -> None:
    """`text` on a status label, in the theme's red for an error."""
    label.setText(text)
    label.setProperty("error", error)
    restyle_status(label)


def restyle_status(label: QLabel) -> None:
    """A status label in the colours of the theme now (an error's red differs between light and dark)."""
    label.setStyleSheet(f"color: {theme.colors().warn}" if label.property("error") else "")
