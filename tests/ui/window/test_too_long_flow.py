"""A message longer than the context: the window says so in a sentence (no exception name) and offers the
ways out at once: send it with its middle cut, raise the context (when the model and the memory allow) and
send it once reloaded, or take it back into the input box to edit it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QMessageBox

from app.engine import protocol as P
from chat_drive import send
from fake_engine import loaded_event
from fake_window import make_window
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui

REFUSAL = ("ValueError: The message is 1300 tokens but the context holds 512. Shorten it or load the model "
           "with a larger context.")


@pytest.fixture
def win_model(qtbot, tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.core.chat.store import ChatStore

    model = write_synthetic_gguf(tmp_path / "tiny-F32.gguf", n_layers=1)
    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store)
    win.show()
    win.load_model(model)
    win.engine._dispatch(_loaded(model, n_ctx=512))
    win.sampling_panel.max_tokens.setValue(256)
    yield win, model
    win.close()
    store.close()


def _loaded(model: Path, n_ctx: int, n_ctx_train: int = 4096) -> P.Loaded:
    return dataclasses.replace(loaded_event(), model_path=str(model), n_ctx=n_ctx, n_ctx_train=n_ctx_train)


def _choose(monkeypatch: pytest.MonkeyPatch, starts: str, offered: list[str]) -> None:
    """The question box answers itself, as a user clicking the button whose text starts with `starts`."""
    def exec_(box: QMessageBox) -> int:
        offered.extend(b.text() for b in box.buttons())
        offered.append(box.text())
        for button in box.buttons():
            if button.text().startswith(starts):
                button.click()
                break
        return 0

    monkeypatch.setattr(QMessageBox, "exec", exec_)


def _sent(win: Any, kind: type) -> list[Any]:
    return [c for c in win.engine.client.sent if isinstance(c, kind)]


def _refuse(win: Any, rid: str) -> None:
    win.engine._dispatch(P.Error(rid, "bad_request", REFUSAL))


def test_cut_the_middle_and_send(win_model, qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    win, _model = win_model
    offered: list[str] = []
    _choose(monkeypatch, "Cut the middle", offered)
    rid = send(win, "a very long text " * 200)
    _refuse(win, rid)
    assert "ValueError" not in win.banner.text() and "1300 tokens" in win.banner.text()
    qtbot.waitUntil(lambda: win.session.busy, timeout=5000)  # sent again, at once
    again = _sent(win, P.Generate)[-1]
    assert again.request_id != rid and again.context_overflow == "truncate-middle"
    assert win.session.context_overflow == "stop"  # for that request only
    msgs = win.store.messages(win.session.conversation.id)
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[-1].state == "streaming"  # no failed reply
    assert "This message is 1300 tokens, but the model's context holds 512." in offered
    assert any(t.startswith("Raise the context to 2048") for t in offered)
    assert not win.banner.isVisibleTo(win)


def test_raise_the_context_reloads_then_sends(win_model, qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    win, model = win_model
    _choose(monkeypatch, "Raise the context", [])
    rid = send(win, "a very long text " * 200)
    _refuse(win, rid)
    qtbot.waitUntil(lambda: _sent(win, P.Load)[-1].config.n_ctx == 2048, timeout=5000)
    assert win.settings.n_ctx == 2048 and not win.session.busy
    generates = len(_sent(win, P.Generate))
    win.engine._dispatch(_loaded(model, n_ctx=2048))  # the model is back, with the larger context
    qtbot.waitUntil(lambda: len(_sent(win, P.Generate)) == generates + 1, timeout=5000)
    assert _sent(win, P.Generate)[-1].context_overflow == "stop" and win.session.busy


def test_edit_takes_the_message_back(win_model, qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    win, _model = win_model
    _choose(monkeypatch, "Edit the message", [])
    text = "a very long text " * 200
    rid = send(win, text)
    _refuse(win, rid)
    qtbot.waitUntil(lambda: win.input.toPlainText() == text.strip(), timeout=5000)
    assert win.store.messages(win.session.conversation.id) == [] and win.message_view.message_ids() == []


def test_cancel_leaves_a_plain_sentence_on_the_reply(win_model, qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    win, _model = win_model
    offered: list[str] = []
    _choose(monkeypatch, "Cancel", offered)
    rid = send(win, "a very long text " * 200)
    _refuse(win, rid)
    qtbot.waitUntil(lambda: bool(offered), timeout=5000)
    reply = win.store.messages(win.session.conversation.id)[-1]
    assert reply.state == "error" and reply.error == "This message is 1300 tokens, but the model's context holds 512."
    assert win.banner.isVisibleTo(win) and "ValueError" not in win.banner.text()


def test_no_raise_past_what_the_model_was_trained_for(win_model, qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    win, model = win_model
    win.engine._dispatch(_loaded(model, n_ctx=512, n_ctx_train=1024))
    offered: list[str] = []
    _choose(monkeypatch, "Cancel", offered)
    _refuse(win, send(win, "a very long text " * 200))
    qtbot.waitUntil(lambda: bool(offered), timeout=5000)
    assert not any(t.startswith("Raise") for t in offered) and any(t.startswith("Cut") for t in offered)
