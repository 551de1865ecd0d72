"""Driving a window on the fake engine like a user and its engine would: send a message, play the engine's
prefill, tokens and Done for the reply being written. Shared by the window tests that need a reply mid-way;
its `win` fixture (tests/conftest.py loads this module as a plugin) is the window those tests start from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.chat.store import ChatStore
from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from fake_engine import loaded_event
from fake_window import make_window


def open_window(qtbot: Any, store: ChatStore, loaded: P.Loaded | None = None) -> Any:
    """A shown window on the fake engine and `store`, its model (`loaded`, the fake model unless given) loaded
    as if the load had finished with the window open."""
    win = make_window(qtbot, store=store)
    win.show()
    win.engine._dispatch(loaded or loaded_event())
    return win


@pytest.fixture
def win(qtbot: Any, tmp_path: Path) -> Iterator[Any]:
    """The chat tests' window: a fresh store, the fake model loaded with the window open."""
    store = ChatStore(tmp_path / "chats.sqlite3")
    w = open_window(qtbot, store)
    yield w
    w.close()
    store.close()


def request_of(win: Any) -> str:
    rid = win.engine.active_request
    assert rid is not None
    return str(rid)


def send(win: Any, text: str) -> str:
    """Type `text` and press Send; the request id of the reply it started."""
    win.input.setPlainText(text)
    win.submit()
    assert win.session.busy
    return request_of(win)


def prefilled(win: Any, rid: str, prompt_tokens: int = 20, prefill_tokens: int = 20, ms: float = 40.0) -> None:
    win.engine._dispatch(P.Prefilled(rid, prompt_tokens=prompt_tokens, prefill_tokens=prefill_tokens,
                                     prefill_ms=ms, ttft_ms=ms + 5, kv_cells_used=prompt_tokens,
                                     kv_bytes_used=0, kv_bytes_per_cell=0.0))


def tokens(win: Any, rid: str, *texts: str, t0: float | None = None, gap: float = 0.01) -> None:
    """The engine streams `texts`, one token each, `gap` seconds apart from `t0` (now)."""
    now = time.monotonic() if t0 is None else t0
    for i, text in enumerate(texts):
        win.engine._on_reader_event(P.Token(rid, text, i, now + gap * i))
    win.engine.drain_tokens()


def metrics(decode_tps: float = 20.0, tokens: int = 5, prompt_tokens: int = 10) -> dict[str, Any]:
    return PhaseMetrics(prompt_tokens=prompt_tokens, prefill_tokens=prompt_tokens, prefill_ms=10.0, ttft_ms=12.0,
                        decode_tokens=tokens - 1, decode_ms=1000.0 * (tokens - 1) / decode_tps,
                        generated_tokens=tokens, itl_ms=[1000.0 / decode_tps] * (tokens - 1),
                        kv_cells_used=prompt_tokens + tokens - 1).to_dict()


def done(win: Any, rid: str, reason: str = "stop", **kw: Any) -> None:
    win.engine._dispatch(P.Done(rid, "", reason, metrics(**kw)))
