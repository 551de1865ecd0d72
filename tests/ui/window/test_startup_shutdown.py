"""Stored content never stops the window from starting, and closing it is orderly whatever the engine does.

- A chat that took the window down while opening is not reopened at the next start (an "opening" marker),
  and the user is told; when they open it, it shows as plain text.
- One message that cannot be rendered shows as plain text with a note; the others render normally.
- Closing the window while the engine is busy, or while it dies, never reaches a closed store
  (`sqlite3.ProgrammingError: Cannot operate on a closed database` from `_update_buttons` before).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.chat.store import ChatStore
from app.core.config.settings import Settings
from app.engine import protocol as P
from app.ui.engine_link import engine_qt as E
from app.ui.window.main_window import MainWindow
from fake_engine import fake_engine
from fake_window import make_window


def _window(qtbot, store: ChatStore | None = None, engine=None) -> MainWindow:  # type: ignore[no-untyped-def]
    return make_window(qtbot, store=store, engine=engine)


def _two_chats(db: Path) -> tuple[int, int]:
    store = ChatStore(db)
    a = store.create_conversation("older chat")
    store.add_message(a.id, "user", "hello")
    b = store.create_conversation("the chat that crashed")
    store.add_message(b.id, "user", "question")
    store.add_message(b.id, "assistant", "**bold** reply")
    store.close()
    return a.id, b.id


def test_a_chat_that_died_while_opening_is_not_reopened(qtbot, roofline_home: Path) -> None:
    from app.core.chat.store import default_db_path

    db = default_db_path()
    older, crashed = _two_chats(db)
    marker = db.with_name(db.name + ".opening")
    # A normal start opens the newest chat, and the marker is gone once it has been shown.
    win = _window(qtbot)
    assert win.session.conversation is not None and win.session.conversation.id == crashed
    assert marker.exists()
    qtbot.waitUntil(lambda: not marker.exists(), timeout=5000)
    win.close()
    # The last run died while opening it: the marker is still there at the next start.
    marker.write_text(str(crashed))
    win = _window(qtbot)
    assert win.session.conversation is None and win.message_view.message_ids() == []
    assert "the chat that crashed" in win.banner.text() and win.banner.isVisibleTo(win)
    assert not marker.exists()
    win.open_conversation(crashed)  # the user asks for it: plain text, Markdown not interpreted
    widgets = [win.message_view.widget_for(i) for i in win.message_view.message_ids()]
    reply = widgets[-1]
    assert reply is not None and reply.plain_only
    assert "**bold** reply" in reply.body.toPlainText() and "plain text" in reply.body.toPlainText()
    win.open_conversation(older)  # other chats render as usual
    assert not any(w.plain_only for w in map(win.message_view.widget_for, win.message_view.message_ids()) if w)
    win.close()
    assert not marker.exists()  # a normal close leaves no marker


def test_one_message_that_cannot_render_falls_back_to_plain_text(qtbot, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from app.ui.chat import message_view

    real = message_view.markdown_to_html

    def flaky(text: str) -> str:
        if "POISON" in text:
            raise RecursionError("maximum recursion depth exceeded")
        return real(text)

    monkeypatch.setattr(message_view, "markdown_to_html", flaky)
    store = ChatStore(tmp_path / "chats.sqlite3")
    conv = store.create_conversation("c")
    store.add_message(conv.id, "user", "q")
    store.add_message(conv.id, "assistant", "POISON **not bold**")
    store.add_message(conv.id, "assistant", "fine **bold**")
    store._db.execute("UPDATE messages SET metrics = '{not json' WHERE content LIKE 'fine%'")
    win = _window(qtbot, store=store)
    ids = win.message_view.message_ids()
    poisoned, fine = win.message_view.widget_for(ids[1]), win.message_view.widget_for(ids[2])
    assert poisoned is not None and fine is not None
    assert "POISON **not bold**" in poisoned.body.toPlainText() and "RecursionError" in poisoned.body.toPlainText()
    assert fine.body.toPlainText().strip() == "fine bold" and not fine.plain_only
    win.close()
    store.close()


def _busy_window(qtbot, tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = fake_engine()
    win = _window(qtbot, engine=engine)
    win.input.setPlainText("tell me a long story")
    win.submit()
    assert win.session.busy and engine.state == E.GENERATING
    rid = win.session._request
    engine.tokens.emit(rid, "Once upon", [0.0])
    return win, engine, rid


def _replies(db: Path) -> list[tuple[str, str]]:
    store = ChatStore(db)
    try:
        return [(m.content, m.state) for c in store.list_conversations() for m in store.messages(c.id)
                if m.role == "assistant"]
    finally:
        store.close()


def test_closing_while_the_engine_is_busy_then_it_reports(qtbot, roofline_home: Path) -> None:
    from app.core.chat.store import default_db_path

    win, engine, rid = _busy_window(qtbot, roofline_home)
    win.close()
    assert win.store.closed
    # The engine's last news arrives after the store closed: none of it may reach the store.
    engine._set_state(E.IDLE)
    engine.tokens.emit(rid, " a time", [0.1])
    engine._dispatch(P.Done(request_id=rid, text="", finish_reason="cancelled", metrics={}))
    engine._dispatch(P.Error(rid, "generation_failed", "late"))
    assert _replies(default_db_path()) == [("Once upon", "interrupted")]


def test_closing_while_the_engine_dies(qtbot, roofline_home: Path) -> None:
    from app.core.chat.store import default_db_path

    win, engine, _rid = _busy_window(qtbot, roofline_home)
    engine.kill()  # the process is gone; its reader has not reported it yet
    win.close()
    engine._dispatch(P.Error(None, "engine_died", "engine process exited (signal 9)", fatal=True))
    engine._set_state(E.DEAD)
    engine.stats.emit(P.Stats(rss_bytes=1, kv_cells_used=0, kv_cells_allocated=0, kv_bytes_used=0,
                                 kv_bytes_allocated=0, loaded=False))
    assert _replies(default_db_path()) == [("Once upon", "interrupted")]


@pytest.mark.model
@pytest.mark.gui
def test_closing_on_the_real_engine_while_busy_and_while_it_dies(qtbot, default_model, roofline_home: Path) -> None:
    """The same two closes with the real engine process: mid-reply, and right after SIGKILL (its death is
    reported by the reader thread while the window is closing). Nothing may raise; the replies keep their text."""
    import os
    import signal

    from app.core.chat.store import default_db_path

    def start() -> MainWindow:
        win = make_window(qtbot, settings=Settings(), as_started=True)
        win.measure_bandwidth_on_load = False
        win.sampling_panel.max_tokens.setValue(400)
        win.sampling_overrides = {"ignore_eos": True}
        win.show()
        win.load_default_model()
        qtbot.waitUntil(lambda: win.engine.loaded_info is not None, timeout=120_000)
        win.new_chat()
        win.input.setPlainText("The history of the city")
        win.submit()
        reply_id = win.session.streaming_message_id
        assert reply_id is not None
        qtbot.waitUntil(lambda: len(win.message_view.widget_for(reply_id).text) > 10,  # type: ignore[union-attr]
                        timeout=60_000)
        return win

    win = start()
    pid = win.engine.pid
    win.close()  # busy
    qtbot.wait(300)
    assert pid is not None
    win = start()
    pid = win.engine.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    win.close()  # dying: the reader thread reports the death during or after the close
    qtbot.wait(1000)
    replies = _replies(default_db_path())
    assert len(replies) == 2 and all(state == "interrupted" and text for text, state in replies), replies
