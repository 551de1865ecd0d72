"""Chat store: conversations, messages, streaming appends, crash recovery, search, WAL."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

from app.core.chat.store import ChatStore, StreamWriter
from app.core.metrics.phase import PhaseMetrics


def test_conversation_crud_and_search(tmp_path):
    store = ChatStore(tmp_path / "c.db")
    assert store.journal_mode == "wal"
    a = store.create_conversation("Physics notes")
    b = store.create_conversation("Shopping")
    store.add_message(b.id, "user", "buy 100% cotton_shirts")
    store.rename_conversation(a.id, "  Quantum  ")
    titles = [c.title for c in store.list_conversations()]
    assert titles == ["Shopping", "Quantum"]  # newest activity first
    assert [c.id for c in store.list_conversations("quant")] == [a.id]
    assert [c.id for c in store.list_conversations("COTTON")] == [b.id]  # message text, any case
    assert store.list_conversations("100%") and not store.list_conversations("100%x")
    assert store.list_conversations("n_s") and not store.list_conversations("t_n")  # _ is literal
    store.delete_conversation(b.id)
    assert [c.id for c in store.list_conversations()] == [a.id]
    assert [m.content for m in store.messages(b.id)] == ["buy 100% cotton_shirts"]  # in the trash
    store.delete_conversation_forever(b.id)
    assert store.messages(b.id) == []  # cascade


def test_metrics_and_truncation(tmp_path):
    store = ChatStore(tmp_path / "c.db")
    conv = store.create_conversation()
    u1 = store.add_message(conv.id, "user", "hi")
    r1 = store.add_message(conv.id, "assistant", "", state="streaming", model="m.gguf")
    pm = PhaseMetrics(prompt_tokens=10, prefill_tokens=10, prefill_ms=20.0, decode_tokens=4, decode_ms=100.0,
                      itl_ms=[20.0, 25.0, 30.0])
    store.update_message(r1.id, content="hello", state="complete", metrics=pm.to_dict(), finish_reason="stop")
    got = store.message(r1.id)
    assert got is not None and got.state == "complete" and got.finish_reason == "stop"
    assert PhaseMetrics.from_dict(got.metrics or {}).decode_tps == pm.decode_tps
    assert store.metrics_series(conv.id)[0]["prefill_tokens"] == 10
    u2 = store.add_message(conv.id, "user", "again")
    store.add_message(conv.id, "assistant", "x")
    assert store.delete_messages_from(conv.id, u2.id) == 2
    assert [m.id for m in store.messages(conv.id)] == [u1.id, r1.id]


def test_bad_state_and_role_rejected(tmp_path):
    store = ChatStore(tmp_path / "c.db")
    conv = store.create_conversation()
    for kwargs in ({"role": "robot"}, {"role": "user", "state": "done"}):
        try:
            store.add_message(conv.id, **kwargs)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"accepted {kwargs}")


def test_stream_writer_batches_by_time(tmp_path):
    store = ChatStore(tmp_path / "c.db")
    conv = store.create_conversation()
    msg = store.add_message(conv.id, "assistant", state="streaming")
    now = [0.0]
    writer = StreamWriter(store, msg.id, interval=0.25, clock=lambda: now[0])
    writer.append("a")
    writer.append("b")
    assert store.message(msg.id).content == ""  # type: ignore[union-attr]
    now[0] = 0.3
    writer.append("c")
    assert store.message(msg.id).content == "abc"  # type: ignore[union-attr]
    writer.append("d")
    writer.flush()
    assert store.message(msg.id).content == "abcd" == writer.text  # type: ignore[union-attr]


def test_killed_process_keeps_streamed_text_and_recovers(tmp_path):
    """A process SIGKILLed mid-stream loses at most the unflushed tail; the next open marks it interrupted."""
    db = tmp_path / "c.db"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        from pathlib import Path
        from app.core.chat.store import ChatStore, StreamWriter
        store = ChatStore(Path({str(db)!r}))
        conv = store.create_conversation()
        msg = store.add_message(conv.id, "assistant", state="streaming")
        w = StreamWriter(store, msg.id, interval=0.0)
        for i in range(50):
            w.append(f"t{{i}} ")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False,
                          cwd=str(__import__("pathlib").Path(__file__).parents[3]))
    assert proc.returncode == -9
    store = ChatStore(db)
    (conv,) = store.list_conversations()
    (msg,) = store.messages(conv.id)
    assert msg.state == "streaming" and msg.content.startswith("t0 t1 ") and msg.content.endswith("t49 ")
    assert store.recover_streaming() == 1
    assert store.message(msg.id).state == "interrupted"  # type: ignore[union-attr]


def test_newer_schema_refused(tmp_path):
    db = tmp_path / "c.db"
    ChatStore(db).close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version=99")
    con.close()
    try:
        ChatStore(db)
    except RuntimeError as exc:
        assert "newer" in str(exc)
    else:
        raise AssertionError("opened a newer schema")
