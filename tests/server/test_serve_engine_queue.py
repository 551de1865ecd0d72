"""The Hub (app.server.engine_queue) over a stand-in engine client: a request whose HTTP side gave up is
cancelled in the engine and keeps its place in the bound until the engine has ended it, so the engine's
inbox cannot grow past `parallel + queue`; a failed restart is retried until the engine is back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from app.engine import protocol as P
from app.engine.client import EngineError
from app.server import engine_queue
from app.server.engine_queue import Hub, Unavailable
from fake_engine import loaded_event


class SilentClient:
    """Takes every command and answers none (an engine busy with something else); `fail_loads` first."""

    fail_loads = 0
    sent: list[Any] = []

    def __init__(self, parallel: int) -> None:
        self.pid = 1

    def start_loaded(self, config: P.LoadConfig, on_event: Any) -> P.Loaded:
        if SilentClient.fail_loads > 0:
            SilentClient.fail_loads -= 1
            raise EngineError(P.Error(None, "load_failed", f"{config.model_path} is missing"))
        return loaded_event()

    def send(self, command: Any) -> None:
        SilentClient.sent.append(command)

    def close(self, timeout: float = 2.0) -> None:
        pass


def generate(i: int) -> P.Generate:
    return P.Generate(request_id=f"r{i}", prompt="x")


def test_a_request_given_up_on_holds_its_place_until_the_engine_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_queue, "ACCEPT_TIMEOUT_S", 0.05)
    SilentClient.sent = []
    hub = Hub(P.LoadConfig(model_path="m.gguf"), parallel=1, max_queue=1, client_factory=SilentClient)  # type: ignore[arg-type]
    hub.start()

    async def run() -> None:
        hub.attach(asyncio.get_running_loop())
        for i in range(2):
            with pytest.raises(TimeoutError):
                await hub.open(generate(i))
        assert [type(c).__name__ for c in SilentClient.sent] == ["Generate", "Cancel", "Generate", "Cancel"]
        with pytest.raises(Unavailable):  # both are still in the engine: nothing more is sent to it
            await hub.open(generate(2))
        assert len(SilentClient.sent) == 4
        hub._route(P.Done("r0", "", "cancelled", {}))  # the engine ends one: its place is free again
        with pytest.raises(TimeoutError):
            await hub.open(generate(3))
        assert hub.in_flight == 2

    asyncio.run(run())


def test_a_failed_restart_is_retried_until_the_engine_is_back() -> None:
    SilentClient.fail_loads = 0
    hub = Hub(P.LoadConfig(model_path="/home/someone/m.gguf"), parallel=1, max_queue=0,
              client_factory=SilentClient)  # type: ignore[arg-type]
    hub.start()
    hub.restart_retry_s = 0.05
    SilentClient.fail_loads = 3
    hub._engine_died(P.Error(None, "engine_died", "killed", fatal=True))
    deadline = time.monotonic() + 30
    while not hub.ready and time.monotonic() < deadline:
        time.sleep(0.02)
    assert hub.ready and hub.restart_error is None and SilentClient.fail_loads == 0
    hub.close()
