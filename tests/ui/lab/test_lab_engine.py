"""The Lab measures through an engine that the window's EngineQt owns: made by its factory (not the chat's
client), at normal priority, closed when the sweep ends or when the window shuts the engines down."""

from __future__ import annotations

import queue
from typing import Any

import pytest

from app.engine import protocol as P
from app.engine.client import EngineError
from app.ui.engine_link.engine_qt import EngineQt
from fake_engine import FakeClient, loaded_event

pytestmark = pytest.mark.gui


class FakeMeasuringClient:
    """Answers Load with Loaded and Bench with a BenchResult of fixed samples, like the blocking client."""

    def __init__(self) -> None:
        self.started = self.closed = False
        self.ready = P.Ready(pid=1, llama_cpp_version="fake", system_info="", gpu_offload=False)
        self.loaded: P.Loaded | None = None
        self.loads: list[P.LoadConfig] = []
        self._events: queue.Queue[Any] = queue.Queue()
        self._n = 0

    def start(self) -> None:
        self.started = True

    def close(self, timeout: float = 5.0) -> None:
        self.closed = True

    def load(self, config: P.LoadConfig, timeout: float = 300.0) -> P.Loaded:
        self.loads.append(config)
        self.loaded = loaded_event()
        return self.loaded

    def new_request_id(self, prefix: str = "r") -> str:
        self._n += 1
        return f"{prefix}-{self._n}"

    def send(self, command: Any) -> None:
        if isinstance(command, P.Bench):
            ms = command.n_prompt + 10 * command.n_gen  # prefill 1 ms/token, decode 10 ms/token
            self._events.put(P.BenchResult(command.request_id, command.n_prompt, command.n_gen, command.n_depth,
                                           [int(ms * 1e6)] * command.repetitions, 1, {"n_threads": 1}))

    def next_event(self, timeout: float | None = None) -> Any:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            raise EngineError(P.Error(None, "timeout", "no answer")) from None


class Factory:
    """EngineQt's client factory: the chat's client is a FakeClient, a measuring one a FakeMeasuringClient."""

    def __init__(self) -> None:
        self.measuring: list[tuple[dict[str, Any], FakeMeasuringClient]] = []

    def __call__(self, on_event: Any = None, **kw: Any) -> Any:
        if on_event is not None:
            return FakeClient(on_event=on_event)
        client = FakeMeasuringClient()
        self.measuring.append((kw, client))
        return client


def test_a_sweep_runs_in_a_measuring_engine_the_window_engine_owns(qtbot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.ui.lab.page import LabPage

    factory = Factory()
    engine = EngineQt(client_factory=factory)
    page = LabPage(model_path=str(tmp_path / "m.gguf"), engine=engine)
    qtbot.addWidget(page)
    page.prompts.setText("16,64")
    page.gens.setText("4")
    page.reps.setValue(1)
    with qtbot.waitSignal(page.finished, timeout=20_000) as blocker:
        page.start_sweep()
    result = blocker.args[0]
    assert len(result.measurements) == 4 and not result.cancelled
    ((kwargs, client),) = factory.measuring
    assert kwargs == {"nice": 0}  # measured at normal priority, not at the chat engine's nice level
    assert client.started and client.closed and client.loads[0].model_path == str(tmp_path / "m.gguf")
    assert engine._measuring == [] and not page.running


def test_shutdown_closes_a_measuring_engine_still_open() -> None:
    factory = Factory()
    engine = EngineQt(client_factory=factory)
    with engine.measuring_engine() as client:
        engine.shutdown(0.1)
        assert client.closed
