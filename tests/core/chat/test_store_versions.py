"""Chat store: versions of regenerated/edited turns, the trash, and the v3 migration of an older store."""

from __future__ import annotations

import sqlite3

from app.core.chat import trash as chat_trash
from app.core.chat import versions as chat_versions
from app.core.chat.store import ChatStore


def _chat(store: ChatStore, *texts: str) -> tuple[int, list[int]]:
    conv = store.create_conversation("c")
    ids = [store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", t).id for i, t in enumerate(texts)]
    return conv.id, ids


def _texts(store: ChatStore, cid: int) -> list[str]:
    return [m.content for m in store.messages(cid)]


def test_regenerate_keeps_earlier_replies_and_browsing_swaps_them(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid, (_, a1) = _chat(store, "hi", "reply one")
    assert chat_versions.replace_from(store, cid, a1) == 1
    a2 = store.add_message(cid, "assistant", "reply two").id
    chat_versions.replace_from(store, cid, a2)
    a3 = store.add_message(cid, "assistant", "reply three").id
    assert chat_versions.places(store, cid) == {a3: chat_versions.VersionPlace(3, 3)}
    assert chat_versions.switch(store, cid, a3, 1)
    assert _texts(store, cid) == ["hi", "reply one"]
    assert chat_versions.places(store, cid) == {a1: chat_versions.VersionPlace(1, 3)}
    assert chat_versions.switch(store, cid, a1, 2)
    assert _texts(store, cid) == ["hi", "reply two"]
    assert not chat_versions.switch(store, cid, a2, 4)  # no such version: nothing changes
    assert not chat_versions.switch(store, cid, a2, 2)  # the one shown
    assert _texts(store, cid) == ["hi", "reply two"]


def test_edit_keeps_the_message_with_what_followed_and_nested_versions_come_back(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid, (u1, a1, u2, a2) = _chat(store, "q1", "a1", "q2", "a2")
    chat_versions.replace_from(store, cid, a2)  # regenerate the last reply ...
    a2b = store.add_message(cid, "assistant", "a2 again").id
    chat_versions.replace_from(store, cid, u2)  # ... then edit the question before it
    u2b = store.add_message(cid, "user", "q2 edited").id
    store.add_message(cid, "assistant", "a2 for the edit")
    assert _texts(store, cid) == ["q1", "a1", "q2 edited", "a2 for the edit"]
    assert chat_versions.places(store, cid) == {u2b: chat_versions.VersionPlace(2, 2)}
    chat_versions.switch(store, cid, u2b, 1)
    assert _texts(store, cid) == ["q1", "a1", "q2", "a2 again"]  # the edit's whole line swapped back
    assert chat_versions.places(store, cid) == {u2: chat_versions.VersionPlace(1, 2),
                                                a2b: chat_versions.VersionPlace(2, 2)}  # nested versions again
    chat_versions.switch(store, cid, a2b, 1)
    assert _texts(store, cid) == ["q1", "a1", "q2", "a2"]
    assert [m.id for m in store.messages(cid)] == [u1, a1, u2, a2]  # own ids: ordered as before


def test_a_damaged_version_row_is_left_out_not_fatal(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid, (_, a1) = _chat(store, "hi", "one")
    chat_versions.replace_from(store, cid, a1)
    a2 = store.add_message(cid, "assistant", "two").id
    chat_versions.replace_from(store, cid, a2)
    a3 = store.add_message(cid, "assistant", "three").id
    with store.transaction() as db:
        db.execute("UPDATE message_versions SET messages = '{not json' WHERE first_id = ?", (a1,))
        db.execute("UPDATE message_versions SET messages = '[{\"id\": 999, \"role\": \"user\"}]' WHERE first_id = ?",
                   (a2,))
    assert chat_versions.places(store, cid) == {}
    assert not chat_versions.switch(store, cid, a3, 1)
    assert _texts(store, cid) == ["hi", "three"]


def test_trash_undo_and_emptying(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    keep, _ = _chat(store, "keep")
    gone, _ = _chat(store, "gone")
    store.delete_conversation(gone)
    assert [c.id for c in store.list_conversations()] == [keep]
    assert [c.id for c in store.list_conversations("gone")] == []  # search leaves the trash out too
    assert [c.id for c in chat_trash.trashed(store)] == [gone]
    chat_trash.restore(store, gone)
    assert {c.id for c in store.list_conversations()} == {keep, gone}
    assert _texts(store, gone) == ["gone"]
    store.delete_conversation(gone)
    deleted_at = chat_trash.trashed(store)[0].deleted
    assert chat_trash.empty(store, older_than_days=30, now=deleted_at + 29 * 86400) == 0
    assert chat_trash.empty(store, older_than_days=30, now=deleted_at + 31 * 86400) == 1
    assert chat_trash.trashed(store) == [] and store.messages(gone) == []


def test_a_v2_store_opens_unchanged_and_gains_versions_and_trash(tmp_path) -> None:
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
            system_prompt TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id INTEGER NOT NULL
            REFERENCES conversations(id) ON DELETE CASCADE, role TEXT NOT NULL, content TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'complete', metrics TEXT, model TEXT, finish_reason TEXT, error TEXT,
            reasoning TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
        INSERT INTO conversations VALUES (1, 'Old chat', '', 1, 2);
        INSERT INTO messages VALUES (1, 1, 'user', 'hello', 'complete', NULL, NULL, NULL, NULL, '', 1, 1);
        INSERT INTO messages VALUES (2, 1, 'assistant', 'hi!', 'complete', NULL, NULL, 'stop', NULL, 'hmm', 2, 2);
        PRAGMA user_version=2;
    """)
    con.close()
    store = ChatStore(path)
    (conv,) = store.list_conversations()
    assert (conv.title, conv.deleted) == ("Old chat", None)
    assert [(m.content, m.reasoning) for m in store.messages(1)] == [("hello", ""), ("hi!", "hmm")]
    assert store.query("PRAGMA user_version") == [(3,)]
    chat_versions.replace_from(store, 1, 2)
    store.add_message(1, "assistant", "hello again")
    assert chat_versions.switch(store, 1, 3, 1) and _texts(store, 1) == ["hello", "hi!"]
    assert store.message(2).reasoning == "hmm"  # type: ignore[union-attr]
