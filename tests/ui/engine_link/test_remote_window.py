"""The chat window against a real OpenAI-compatible server (llama-cpp-python's, on loopback): the same UI,
client-side timings labelled as such, and the way back to the local engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.ui.engine_link import engine_qt as E
from fake_window import make_window
from llama_server import KEY

pytestmark = [pytest.mark.gui, pytest.mark.model]


def test_chat_through_a_remote_server_then_back_to_local(qtbot, server: str, default_model: Path) -> None:
    win = make_window(qtbot, as_started=True)
    win.show()
    win.measure_bandwidth_on_load = False
    win.sampling_panel.max_tokens.setValue(8)
    win.connect_remote(server, api_key=KEY)
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None, timeout=30_000)
    assert win.engine.remote is not None and win.engine.pid is None  # no local engine process meanwhile
    assert "client-side" in win.model_info.full_text()  # (what fits the toolbar: tests/ui/window/test_model_line.py)
    win.input.setPlainText("Say hello.")
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not win.session.busy, timeout=60_000)
    reply = win.store.messages(win.session.conversation.id)[-1]
    assert reply.role == "assistant" and reply.state == "complete" and reply.content
    assert reply.metrics is not None and reply.metrics["source"] == "client-side wall clock"
    assert reply.metrics["ttft_ms"] > 0
    assert win.dashboard.card_prefill.value.text() == "n/a"
    assert win.dashboard.card_ttft.detail.text() == "client-side"
    # A remote URL is not a file: it is not remembered as the last model to reopen.
    assert win.settings.last_model != win.engine.loaded_info.model_path
    # Back to the local engine.
    win.load_model(default_model)
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None and win.engine.remote is None, timeout=90_000)
    assert win.engine.pid is not None and win.engine.state == E.IDLE
    win.close()


def test_a_bad_server_url_is_an_error_not_a_crash(qtbot) -> None:
    win = make_window(qtbot, as_started=True)
    errors = []
    win.engine.error.connect(errors.append)
    win.connect_remote("http://127.0.0.1:1", api_key=None)  # nothing listens on port 1
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert not errors[0].fatal and win.engine.loaded_info is None
    assert win.engine.state == E.STOPPED  # as before the attempt: no local engine was running
    assert "Could not connect to the server" in win.banner.text()
    win.close()
