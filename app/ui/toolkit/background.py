"""One way to run slow work off the GUI thread: `run_in_background(owner, fn, on_done, on_error)`.

Why one helper: the window reads files, probes the machine, talks to hubs and servers while it must keep
painting, and each of those results must land on the GUI thread only while the widget that asked for it still
exists. The lifetime guard lives here, once: the result travels through a relay object parented to `owner`;
when the owner is deleted (a closed window or dialog) Qt deletes the relay with it, and a result that arrives
afterwards is dropped instead of touching a dead widget.

Daemon threads rather than QThreadPool: a pool makes application exit wait for every queued task (a stuck
network call would hold the window open); a daemon thread is abandoned at exit.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

__all__ = ["BackgroundJob", "run_in_background"]


class _Relay(QObject):
    done = Signal(object)
    failed = Signal(object)


class BackgroundJob:
    """A handle on one background call: `cancel()` drops its result (the work itself runs to its end)."""

    def __init__(self, name: str):
        self.name = name
        self.finished = threading.Event()
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


def run_in_background(
    owner: QObject,
    fn: Callable[[], Any],
    on_done: Callable[[Any], None] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    *,
    name: str = "background",
) -> BackgroundJob:
    """Run `fn()` on a daemon thread; call `on_done(result)` or `on_error(exception)` on the GUI thread, and
    neither once `owner` is deleted or the job is cancelled. An exception in `fn` never escapes the thread:
    without `on_error` it is dropped (the caller chose that the result is optional)."""
    relay = _Relay(owner)
    job = BackgroundJob(name)
    owner_ref = weakref.ref(owner)
    lock = threading.Lock()
    gone = threading.Event()

    def owner_gone(*_: Any) -> None:
        with lock:
            gone.set()

    def deliver(callback: Callable[[Any], None] | None, value: Any) -> None:
        alive = owner_ref()  # a weak reference: this closure must not keep the owner alive
        if alive is not None:  # one connection per job: a long-lived owner must not collect them
            try:
                alive.destroyed.disconnect(owner_gone)
            except (RuntimeError, TypeError):
                pass
        # Unparent first: deleting the relay frees these callbacks, which may hold the last reference to the
        # owner; a parentless owner then dies at once and, were the relay still its child, would delete the
        # relay a second time from inside the relay's own destructor (a crash).
        relay.setParent(None)
        relay.deleteLater()
        if callback is not None and not job.cancelled:
            callback(value)

    relay.done.connect(lambda value: deliver(on_done, value))
    relay.failed.connect(lambda exc: deliver(on_error, exc))
    # The worker emits on the relay from its own thread while the GUI thread may be deleting the owner, and
    # with it the relay: an emit on a half-destroyed relay crashes the process (SIGSEGV, reproduced with an
    # owner deleted as its job finished). The owner's `destroyed` runs on the GUI thread before its children
    # are deleted; taking the same lock there as around the emit means the relay is either whole or known gone.
    owner.destroyed.connect(owner_gone)

    def work() -> None:
        try:
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - a thread must report, never die silently
            outcome, value = relay.failed, exc
        else:
            outcome, value = relay.done, result
        try:
            with lock:  # a queued emit only posts an event: the GUI thread waits microseconds at most
                if not gone.is_set():
                    outcome.emit(value)
        except RuntimeError:  # the relay is gone: nobody is waiting for the result
            pass
        finally:
            job.finished.set()

    threading.Thread(target=work, name=name, daemon=True).start()
    return job
