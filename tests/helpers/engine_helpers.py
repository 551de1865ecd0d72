"""Running the real engine in tests: a started, loaded client, and one request's events collected."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from app.engine import protocol as P
from app.engine.client import EngineClient


def running_engine(model: Path, n_threads: int, n_ctx: int = 1024) -> Iterator[EngineClient]:
    """For a fixture: `yield from running_engine(default_model, 2)`; the engine stops after the last test."""
    client = EngineClient()
    client.start()
    client.load(P.LoadConfig(model_path=str(model), n_ctx=n_ctx, n_threads=n_threads))
    yield client
    client.close()


def collect(client: EngineClient, req: P.Generate, timeout: float = 300) -> tuple[list[P.Token], P.Done]:
    """The reply's token events and its Done (anything else, such as an error, fails the test)."""
    tokens: list[P.Token] = []
    done = None
    for event in client.generate(req, timeout=timeout):
        if isinstance(event, P.Token):
            tokens.append(event)
        else:
            done = event
    assert isinstance(done, P.Done), done
    return tokens, done
