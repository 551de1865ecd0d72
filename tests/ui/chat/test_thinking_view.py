"""The window side of the reasoning split: a fake engine streams thinking, then the answer; the store keeps
both, the message shows the thinking collapsed under a "Thought for … · N tokens" toggle, reopening shows it
again, an old store without the column opens, and the dashboard adds the first answer token's time."""

from __future__ import annotations

import sqlite3

import pytest

from app.core.chat.store import ChatStore
from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from app.ui.chat.message_view import MessageView
from app.ui.chat.session import ChatSession
from app.ui.chat.thinking_box import connect_thinking
from app.ui.dashboard.reasoning_line import reasoning_line
from fake_window import make_window

pytestmark = pytest.mark.gui

THOUGHT = "The user greets me. <b>I</b> should greet back."
ANSWER = "Hello there!"
METRICS = {**PhaseMetrics(prompt_tokens=5, decode_tokens=20).to_dict(),
           "reasoning_tokens": 12, "reasoning_ms": 2400.0, "ttft_answer_ms": 2512.0}


def _reply(qtbot, tmp_path):
    from fake_engine import fake_engine

    store = ChatStore(tmp_path / "chats.sqlite3")
    engine = fake_engine()
    session = ChatSession(store, engine)
    view = MessageView()
    qtbot.addWidget(view)
    session.conversation_changed.connect(lambda _id: view.set_messages(store.messages(_id)))
    session.message_added.connect(view.add_message)
    session.stream_text.connect(view.append_text)
    session.message_finished.connect(view.update_message)
    connect_thinking(session, view)
    assert session.send("hi")
    rid = engine.client.sent[-1].request_id
    reply_id = session.streaming_message_id
    for i, piece in enumerate(["The user greets me. ", "<b>I</b> should greet back."]):
        engine._on_reader_event(P.Token(request_id=rid, text="", index=i, t=float(i), reasoning=piece))
    engine.drain_tokens()
    return store, engine, session, view, rid, reply_id


def test_reasoning_streams_is_stored_and_shown_collapsed(qtbot, tmp_path):
    store, engine, session, view, rid, reply_id = _reply(qtbot, tmp_path)
    box = view.widget_for(reply_id).thinking
    assert box.isVisibleTo(view) and box.toggle.text() == "Thinking…"  # live, before any answer
    assert box.reasoning == THOUGHT and not box.expanded
    engine._on_reader_event(P.Token(request_id=rid, text=ANSWER, index=2, t=2.0))
    engine._dispatch(P.Done(request_id=rid, text=ANSWER, finish_reason="stop", metrics=METRICS, reasoning=THOUGHT))
    msg = store.message(reply_id)
    assert msg is not None and msg.content == ANSWER and msg.reasoning == THOUGHT  # the answer alone in content
    widget = view.widget_for(reply_id)
    assert widget.text == ANSWER
    assert box.toggle.text() == "Thought for 2.4 s · 12 tokens"
    assert not box.text_view.isVisibleTo(view)  # collapsed
    box.toggle.click()
    assert box.text_view.isVisibleTo(view) and box.text_view.toPlainText() == THOUGHT  # plain: <b> stays text

    # Reopening the chat (a new window on the same file) shows it again.
    conv = session.conversation.id
    session.close()
    store.close()
    store2 = ChatStore(tmp_path / "chats.sqlite3")
    view2 = MessageView()
    qtbot.addWidget(view2)
    view2.set_messages(store2.messages(conv))
    box2 = view2.widget_for(reply_id).thinking
    assert box2.isVisibleTo(view2) and box2.toggle.text() == "Thought for 2.4 s · 12 tokens"
    assert box2.reasoning == THOUGHT and box2.text_view.toPlainText() == THOUGHT and not box2.expanded
    user_box = view2.widget_for(view2.message_ids()[0]).thinking
    assert not user_box.isVisibleTo(view2)  # no thinking, no toggle
    store2.close()


def test_old_store_without_the_column_opens(tmp_path):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
            system_prompt TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id INTEGER NOT NULL,
            role TEXT NOT NULL, content TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT 'complete',
            metrics TEXT, model TEXT, finish_reason TEXT, error TEXT, created REAL NOT NULL, updated REAL NOT NULL);
        INSERT INTO conversations VALUES (1, 'old', '', 1, 1);
        INSERT INTO messages (conversation_id, role, content, created, updated) VALUES (1, 'assistant', 'hi', 1, 1);
        PRAGMA user_version=1;
    """)
    db.close()
    store = ChatStore(path)
    [old] = store.messages(1)
    assert old.content == "hi" and old.reasoning == ""
    store.update_message(old.id, reasoning="thought")
    assert store.message(old.id).reasoning == "thought"
    store.close()


def test_dashboard_line_shows_first_answer_and_thinking_tokens():
    assert reasoning_line(METRICS) == "first answer 2512 ms · 12 thinking tok"
    assert reasoning_line({**METRICS, "reasoning_tokens": 0}) == ""


def test_dashboard_ttft_card_gets_the_line(qtbot):
    from app.ui.dashboard import Dashboard
    from fake_engine import fake_engine

    engine = fake_engine()
    dash = Dashboard(engine)
    qtbot.addWidget(dash)
    dash.add_metrics(PhaseMetrics.from_dict(METRICS))
    dash.show_reply_lines(METRICS, "stop")
    assert dash.card_ttft.detail.text().endswith("first answer 2512 ms · 12 thinking tok")


def test_the_window_streams_thinking_live(qtbot, tmp_path):
    """The real window wires the session's thinking into its message view while the reply streams."""
    from fake_engine import fake_engine

    store = ChatStore(tmp_path / "chats.sqlite3")
    engine = fake_engine()
    win = make_window(qtbot, store=store, engine=engine)
    assert win.session.send("hi")
    rid = engine.client.sent[-1].request_id
    reply_id = win.session.streaming_message_id
    engine._on_reader_event(P.Token(request_id=rid, text="", index=0, t=0.0, reasoning=THOUGHT))
    engine.drain_tokens()
    box = win.message_view.widget_for(reply_id).thinking
    assert box.reasoning == THOUGHT and box.toggle.text() == "Thinking…"
    engine._dispatch(P.Done(request_id=rid, text=ANSWER, finish_reason="stop", metrics=METRICS, reasoning=THOUGHT))
    win.close()
