"""A damaged chat store never keeps the window from starting: it is kept aside, what can be read is recovered,
and the banner names both files. `--self-test` checks the real store read-only and fails naming it."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

from app.core.chat.store import ChatStore
from app.core.chat.store_recovery import integrity_problem, open_chat_store
from fake_window import make_window


def _store_with(path: Path, conversations: int = 6, messages: int = 40) -> None:
    store = ChatStore(path)
    for c in range(conversations):
        conv = store.create_conversation(f"chat {c}")
        for m in range(messages):
            store.add_message(conv.id, "user" if m % 2 == 0 else "assistant", f"message {c}.{m} " + "words " * 80)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def _corrupt_page(path: Path, page: int) -> None:
    size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek(size * page)
        f.write(random.Random(page).randbytes(size))


def _damaged(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.glob(path.name + ".damaged-*") if not p.name.endswith(("-wal", "-shm")))


def test_random_bytes_are_kept_aside_and_the_store_starts_empty(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    junk = random.Random(1).randbytes(50_000)
    db.write_bytes(junk)
    opened = open_chat_store(db)
    assert opened.backup is not None and opened.backup.read_bytes() == junk  # kept exactly as it was
    assert opened.store.list_conversations() == []
    assert str(opened.backup) in (opened.warning or "") and str(db) in (opened.warning or "")
    opened.store.close()
    assert integrity_problem(db) is None


def test_a_corrupt_page_loses_only_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    _store_with(db)
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    _corrupt_page(db, pages // 2)
    assert integrity_problem(db) is not None
    opened = open_chat_store(db)
    assert opened.backup is not None and len(_damaged(db)) == 1
    recovered = opened.recovered
    assert recovered["conversations"] == 6
    assert 200 <= recovered["messages"] < 240  # one page of ~240 messages lost, the rest kept
    texts = [m.content for c in opened.store.list_conversations() for m in opened.store.messages(c.id)]
    assert len(texts) == recovered["messages"] and all(t.startswith("message ") for t in texts)
    opened.store.close()
    assert integrity_problem(db) is None
    assert os.stat(db).st_mode & 0o777 == 0o600


def test_the_window_starts_on_a_damaged_store_and_names_both_files(qtbot, roofline_home: Path) -> None:
    from app.core.chat.store import default_db_path
    from app.core.config.settings import Settings

    db = default_db_path()
    _store_with(db, conversations=2, messages=4)
    _corrupt_page(db, 0)  # the header page: "file is not a database"
    win = make_window(qtbot, settings=Settings(), as_started=True)
    backups = _damaged(db)
    assert len(backups) == 1
    text = win.banner.text()
    assert win.banner.isVisibleTo(win) and str(backups[0]) in text and str(db) in text
    win.close()


def test_self_test_fails_on_a_damaged_real_store_naming_it(roofline_home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from app import selftest
    from app.core.chat.store import default_db_path

    db = default_db_path()
    _store_with(db, conversations=2, messages=10)
    before = db.read_bytes()
    code = selftest.main(["--no-gui", "-m", str(roofline_home / "no-model.gguf")])
    out = capsys.readouterr().out
    assert "ok   your chat store" in out and code == 1  # (the missing model fails it too)
    _corrupt_page(db, 1)
    damaged = db.read_bytes()
    code = selftest.main(["--no-gui", "-m", str(roofline_home / "no-model.gguf")])
    out = capsys.readouterr().out
    assert code == 1 and f"FAIL your chat store: RuntimeError: {db} is damaged" in out
    assert db.read_bytes() == damaged != before  # read-only: the self-test never repairs or moves it
    assert not _damaged(db)
