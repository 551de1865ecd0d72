"""The window's background work goes through app.ui.toolkit.background, and a result that comes back too late is
dropped: the default model prepared after the window closed loads nothing, and a remote connection that fails
after its engine object was deleted reports nothing (instead of calling into a deleted object)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import shiboken6

from app.engine import protocol as P
from app.ui.engine_link.engine_qt import EngineQt
from app.ui.window.main_window import MainWindow
from fake_engine import FakeClient, fake_engine, gemma_loaded
from fake_window import make_window

PREPARED = "/models/default-Q4_K_M.gguf"


def _slow_default_model(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Replace the default-model assembly with one that waits for `release`; `started` says it began."""
    from app.core.models import default_model

    started, release = threading.Event(), threading.Event()

    def prepare(ensure: bool = True) -> Path:
        started.set()
        release.wait(10)
        return Path(PREPARED)

    monkeypatch.setattr(default_model, "default_model_path", prepare)
    return started, release


def _loads(engine: EngineQt) -> list[str]:
    return [c.config.model_path for c in engine.client.sent if isinstance(c, P.Load)]


def _window(qtbot, engine: EngineQt) -> MainWindow:  # type: ignore[no-untyped-def]
    return make_window(qtbot, engine=engine)


def test_the_default_model_prepared_in_the_background_is_loaded(qtbot, roofline_home: Path, monkeypatch) -> None:
    started, release = _slow_default_model(monkeypatch)
    engine = fake_engine()
    win = _window(qtbot, engine)
    win.load_default_model()
    assert started.wait(5)
    assert "preparing the default model" in win.state_label.text()  # the window did not wait for it
    release.set()
    qtbot.waitUntil(lambda: _loads(engine) == [PREPARED], timeout=5000)
    win.close()


def test_closing_the_window_while_the_default_model_is_prepared_loads_nothing(
        qtbot, roofline_home: Path, monkeypatch) -> None:
    started, release = _slow_default_model(monkeypatch)
    engine = fake_engine()
    win = _window(qtbot, engine)
    win.load_default_model()
    assert started.wait(5)
    win.close()
    release.set()
    assert win._default_job is not None and win._default_job.finished.wait(5)
    qtbot.wait(100)  # a result would arrive now, through the event loop
    assert _loads(engine) == []  # no engine started for a closed window
    assert win.store.closed


def test_a_remote_connect_that_fails_after_its_engine_was_deleted_is_dropped(qtbot, monkeypatch) -> None:
    from app.engine.remote import backend as remote

    release = threading.Event()

    class SlowDeadServer:
        """Stands in for RemoteClient: connecting takes until `release`, then fails."""

        alive, pid = False, None

        def __init__(self, url: str, api_key: str | None = None, model: str | None = None, on_event=None):  # type: ignore[no-untyped-def]
            self.url = url

        def connect(self) -> None:
            release.wait(10)
            raise ConnectionRefusedError(f"nobody listens at {self.url}")

        def close(self, timeout: float = 2.0) -> None:
            pass

    monkeypatch.setattr(remote, "RemoteClient", SlowDeadServer)
    kept = EngineQt(client_factory=FakeClient)
    errors: list[P.Error] = []
    kept.error.connect(errors.append)
    gone = EngineQt(client_factory=FakeClient)
    gone.connect_remote("http://127.0.0.1:9/gone")
    kept.connect_remote("http://127.0.0.1:9/kept")
    shiboken6.delete(gone)  # e.g. its window was closed and deleted while the connection was still trying
    release.set()
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    for thread in threading.enumerate():
        if thread.name == "remote-connect":
            thread.join(5)
    qtbot.wait(100)  # the deleted engine's failure would arrive now (and raise inside Qt: a failed test)
    assert [(e.kind, e.message) for e in errors] == [
        ("connect_failed", "ConnectionRefusedError: nobody listens at http://127.0.0.1:9/kept")]
    kept.shutdown()


def test_the_bandwidth_feed_survives_a_failure_and_then_runs_the_measurement_asked_for(qtbot, monkeypatch) -> None:
    from PySide6.QtCore import QObject

    from app.ui.dashboard import bandwidth_feed

    asked: list[tuple[str | None, bool]] = []
    gate = threading.Event()

    def read(path: str | None, threads: int, measure: bool) -> tuple[object, bool]:
        asked.append((path, measure))
        if not measure:
            gate.wait(5)
            raise OSError("no cache folder")
        return "roofs", True

    monkeypatch.setattr(bandwidth_feed, "read_roofs", read)
    monkeypatch.setattr(bandwidth_feed, "read_device_roofs", dict)
    shown: list[object] = []

    class Dashboard:
        def set_machine_roofs(self, roofs: object) -> None:
            shown.append(roofs)

    owner = QObject()
    feed = bandwidth_feed.BandwidthFeed(Dashboard(), owner)
    feed.request()
    feed.request(gemma_loaded(), measure=True)  # asked while the first is still running: remembered, run next
    gate.set()
    qtbot.waitUntil(lambda: shown == ["roofs"], timeout=5000)
    assert asked == [(None, False), ("/m/x-Q4_K_M.gguf", True)] and feed.known
