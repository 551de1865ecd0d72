"""EngineQt's remote servers: connecting to an OpenAI-compatible server while the engine in use stays in use,
the swap once the server answers, and the way back to a local engine.

A mixin of EngineQt (it declares no signals: those live on EngineQt). The server being connected to is kept
apart (`_connecting`) until its Loaded arrives, tagged with the connection it came from (`ServerAnswered`),
so a failed or abandoned connection never touches the model in use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from app.engine import protocol as P
from app.engine.client import EngineError
from app.ui.toolkit.background import run_in_background

if TYPE_CHECKING:
    from PySide6.QtCore import QObject, QTimer, SignalInstance

IDLE, LOADING, STOPPED = "idle", "loading", "stopped"  # the states of app.ui.engine_link.engine_qt used here


@dataclasses.dataclass
class ServerAnswered:
    """A server's Loaded, with the connection it came from (only the one being connected to takes over)."""

    client: Any
    loaded: P.Loaded


class RemoteConnecting:
    if TYPE_CHECKING:  # EngineQt's, used here
        _client: Any
        _factory: Callable[..., Any]
        _batch: QTimer
        _pending: Any
        _active_request: str | None
        remote: tuple[str, str | None, str | None] | None
        done: SignalInstance
        error: SignalInstance

        def _set_state(self, state: str) -> None: ...
        def _on_reader_event(self, event: Any) -> None: ...

    _connecting: Any = None  # a server being connected to; the current engine stays meanwhile
    _connecting_to: tuple[str, str | None, str | None] | None = None

    @property
    def connecting(self) -> bool:
        """A server is being connected to (the current engine is still the one in use)."""
        return self._connecting is not None

    def connect_remote(self, url: str, api_key: str | None = None, model: str | None = None) -> None:
        """Chat with an OpenAI-compatible server instead of the local engine. Connecting runs in the
        background while the current engine (and its model) stays in use: only once the server has answered
        is the local engine shut down to free its memory; a failure leaves everything as it was and arrives
        as a `connect_failed` error."""
        from app.engine.remote.backend import RemoteClient

        if self._connecting is not None:
            self._connecting.close(0.5)
        sender: list[Any] = []

        def relay(event: Any) -> None:  # reader thread: a server's answer says which connection it came from
            self._on_reader_event(ServerAnswered(sender[0], event) if isinstance(event, P.Loaded) else event)

        client = RemoteClient(url, api_key=api_key, model=model, on_event=relay)
        sender.append(client)
        self._connecting = client
        self._connecting_to = (url, api_key, model)
        self._set_state(LOADING)

        # connect() delivers Loaded through on_event (the swap happens there); a failure comes back here
        run_in_background(cast("QObject", self), client.connect,
                          on_error=lambda exc: self._connect_failed(client, exc), name="remote-connect")

    def _take_remote(self) -> None:
        """The server answered: it becomes the engine, and the one used until now is shut down."""
        assert self._connecting is not None
        self._batch.stop()
        self._pending.clear()
        cut, self._active_request = self._active_request, None
        self._client.close(2.0)
        if cut is not None:  # a reply the old engine had not finished: it ends here, as stopped
            self.done.emit(P.Done(cut, "", "cancelled", {}))
        self._client, self._connecting = self._connecting, None
        self.remote = self._connecting_to

    def _connect_failed(self, client: Any, exc: BaseException) -> None:
        if client is not self._connecting:
            return  # an older attempt, already replaced by a newer one
        client.close(0.5)
        self._connecting = None
        reason = exc.error.message if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
        self._set_state(IDLE if self._client.alive else STOPPED)
        self.error.emit(P.Error(None, "connect_failed", reason))

    def _back_to_local(self) -> None:
        if self.remote is not None:
            self._client.close(2.0)
            self.remote = None
            self._client = self._factory(on_event=self._on_reader_event)
            self._set_state(STOPPED)

