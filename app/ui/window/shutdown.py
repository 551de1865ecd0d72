"""Closing the main window in an order that leaves nothing half-done and nothing touching a closed store.

Order: end the reply being written (its text is saved as `interrupted`), clear the "opening" marker, save
the settings, stop the Lab's runs and the server the Serve switch started, cut the engine's signals off from
the window and the chat session (an engine that reports a state change or dies during shutdown must not
reach a handler that reads the store), stop the engine, and only then close the store.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


def disconnect_quietly(signal: Any, slot: Any) -> None:
    """Disconnect one slot; "was not connected" is fine (PySide6 warns or raises depending on version)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            signal.disconnect(slot)
        except (RuntimeError, TypeError):
            pass


def shut_down(window: MainWindow) -> None:
    session = window.session
    if session.busy:
        session.stop()
        session._abandon()
    window._opening.clear()
    window.drafts.save()  # what was typed and not sent, for the next start
    window.save_settings()
    if window.lab_page.widget is not None:
        window.lab_page.widget.shutdown()  # type: ignore[attr-defined]
    window.serve_switch.stop()  # a server started from the window does not outlive it
    engine = window.engine
    for signal, slot in ((engine.state_changed, window._engine_state), (engine.progress, window._progress),
                         (engine.loaded, window._loaded), (engine.error, window._engine_error),
                         (engine.stats, window._stats)):
        disconnect_quietly(signal, slot)
    session.close()
    engine.shutdown()
    if window._owns_store:
        window.store.close()
