"""Open the chat store so that a damaged file never stops the app: keep it aside, recover what can be read.

`open_chat_store` opens the store and runs SQLite's quick check. When the file is not a database, or a page is
corrupt, the file (with its -wal and -shm) is moved aside as `chats.sqlite3.damaged-<time>`; the rows that can
still be read are copied table by table (row by row around damaged pages: SQLite's own `.recover` lives in
the sqlite3 shell, which is not always installed) into a fresh store at the usual path, and the caller gets a
warning naming both files. A store written by a newer Roofline is left alone and the app runs on an
in-memory store. `integrity_problem` is the read-only check `roofline --self-test` runs on the real store.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.chat.store import ROLES, STATES, ChatStore, default_db_path
from app.core.files.aside import aside_name

CONVERSATION_COLUMNS = ("id", "title", "system_prompt", "created", "updated")
MESSAGE_COLUMNS = ("id", "conversation_id", "role", "content", "state", "metrics", "model", "finish_reason",
                   "error", "created", "updated", "reasoning")
MAX_ROWID = 2**62
MAX_READ_ERRORS = 4000  # bounded time on a file that is damaged everywhere
SIDE_FILES = ("-wal", "-shm")


@dataclass
class OpenedStore:
    store: ChatStore
    warning: str | None = None  # shown in the window's banner
    backup: Path | None = None  # where the damaged file was kept
    recovered: dict[str, int] = field(default_factory=dict)  # table -> rows recovered


def integrity_problem(path: Path) -> str | None:
    """Read-only `PRAGMA integrity_check` of a store: None when sound, else what SQLite says is wrong."""
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        rows = [str(r[0]) for r in con.execute("PRAGMA integrity_check(5)").fetchall()]
        return None if rows == ["ok"] else "; ".join(rows)
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        con.close()


def open_chat_store(path: Path | None = None) -> OpenedStore:
    path = path or default_db_path()
    try:
        store = ChatStore(path)
    except RuntimeError as exc:  # written by a newer Roofline: not damaged, not ours to touch
        return OpenedStore(ChatStore(Path(":memory:")),
                           f"{exc}. Chats are not saved in this session; update Roofline to use them.")
    except sqlite3.DatabaseError as exc:
        return recover(path, str(exc))
    try:
        problem = store.quick_check()
    except sqlite3.DatabaseError as exc:
        problem = str(exc)
    if problem is None:
        return OpenedStore(store)
    store.close()
    return recover(path, problem)


def move_aside(path: Path) -> Path:
    """Move the store and its WAL/SHM files to `<name>.damaged-<time>[-wal|-shm]` (SQLite's own side-file
    names, so the kept copy opens with its last writes)."""
    backup = aside_name(path, "damaged")
    os.replace(path, backup)
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, backup.with_name(backup.name + suffix))
    return backup


def recover(path: Path, problem: str) -> OpenedStore:
    try:
        backup = move_aside(path)
    except OSError as exc:
        return OpenedStore(ChatStore(Path(":memory:")),
                           f"The chat store {path} is damaged ({problem}) and could not be moved aside "
                           f"({exc.strerror or exc}); it was left untouched. Chats are not saved in this session.")
    conversations, messages = salvage(backup)
    store = ChatStore(path)
    conversations, messages = _clean(conversations, messages)
    store.restore_rows(conversations, messages)
    store.recover_streaming()
    warning = (f"The chat store was damaged ({problem}). It was kept as {backup}; {len(conversations)} "
               f"conversation(s) and {len(messages)} message(s) were recovered into {path}.")
    return OpenedStore(store, warning, backup, {"conversations": len(conversations), "messages": len(messages)})


def salvage(damaged: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every readable row of both tables. Works on a temporary copy: the kept file is never written."""
    with tempfile.TemporaryDirectory(prefix="roofline-recover-") as tmp:
        copy = Path(tmp) / "damaged.sqlite3"
        shutil.copyfile(damaged, copy)
        for suffix in SIDE_FILES:
            side = damaged.with_name(damaged.name + suffix)
            if side.exists():
                shutil.copyfile(side, copy.with_name(copy.name + suffix))
        try:
            con = sqlite3.connect(copy)
        except sqlite3.Error:
            return [], []
        try:
            return (salvage_table(con, "conversations", CONVERSATION_COLUMNS),
                    salvage_table(con, "messages", MESSAGE_COLUMNS))
        finally:
            con.close()


def _columns(con: sqlite3.Connection, table: str, wanted: tuple[str, ...]) -> list[str]:
    try:
        present = {str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError:
        return []
    return [c for c in wanted if c in present]


def salvage_table(con: sqlite3.Connection, table: str, wanted: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows in rowid order; a read that fails (a damaged page) resumes past it, skipping ever further
    (1, 2, 4 … rowids) so a wide hole costs a few dozen tries, not one per missing row."""
    columns = _columns(con, table, wanted)
    if not columns:
        return []
    sql = f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid > ? ORDER BY rowid"
    rows: dict[int, dict[str, Any]] = {}
    after, step, errors = -1, 1, 0
    while after < MAX_ROWID and errors < MAX_READ_ERRORS:
        try:
            for row in con.execute(sql, (after,)):
                rows[int(row[0])] = dict(zip(columns, row[1:], strict=False))
                after, step = int(row[0]), 1
            break
        except sqlite3.DatabaseError:
            errors += 1
            after += step
            step *= 2
    return [rows[k] for k in sorted(rows)]


def _as_text(value: Any, default: str = "") -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return default if value is None else str(value)


def _as_time(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return time.time()


def _clean(conversations: list[dict[str, Any]], messages: list[dict[str, Any]]
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows the new store's constraints accept: messages of lost conversations get a "Recovered chat"."""
    convs: dict[int, dict[str, Any]] = {}
    for c in conversations:
        if not isinstance(c.get("id"), int):
            continue
        convs[c["id"]] = {"id": c["id"], "title": _as_text(c.get("title"), "Recovered chat") or "Recovered chat",
                          "system_prompt": _as_text(c.get("system_prompt")), "created": _as_time(c.get("created")),
                          "updated": _as_time(c.get("updated"))}
    out: list[dict[str, Any]] = []
    for m in messages:
        cid, mid = m.get("conversation_id"), m.get("id")
        if not isinstance(cid, int) or not isinstance(mid, int) or m.get("role") not in ROLES:
            continue
        if cid not in convs:
            now = time.time()
            convs[cid] = {"id": cid, "title": f"Recovered chat {cid}", "system_prompt": "", "created": now,
                          "updated": now}
        metrics = m.get("metrics")
        out.append({"id": mid, "conversation_id": cid, "role": m["role"], "content": _as_text(m.get("content")),
                    "state": m.get("state") if m.get("state") in STATES else "interrupted",
                    "metrics": metrics if isinstance(metrics, str) else None,
                    "model": m.get("model") if isinstance(m.get("model"), str) else None,
                    "finish_reason": m.get("finish_reason") if isinstance(m.get("finish_reason"), str) else None,
                    "error": m.get("error") if isinstance(m.get("error"), str) else None,
                    "created": _as_time(m.get("created")), "updated": _as_time(m.get("updated"))})
    return list(convs.values()), out
