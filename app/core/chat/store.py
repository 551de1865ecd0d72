"""Conversations and messages in SQLite (WAL), including each reply's phase metrics.

A reply is written while it streams (`StreamWriter` batches appends, every 250 ms by default), so a crash
of the engine or of the window loses at most that fraction of a second. Message states:
`complete`, `streaming` (being written now; left over after a crash it becomes `interrupted` on the next
open), `interrupted` (engine died or user stopped; the text so far is kept and can be continued or
regenerated) and `error`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.config import paths

# 2: messages.reasoning (a reasoning model's thinking, apart from the answer)
# 3: message_versions (earlier versions of regenerated or edited turns) and conversations.deleted (the trash)
SCHEMA_VERSION = 3
STATES = ("complete", "streaming", "interrupted", "error")
ROLES = ("user", "assistant", "system")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    deleted REAL  -- when it went to the trash; NULL for a live chat
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: views key widgets by id
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'complete'
        CHECK (state IN ('complete', 'streaming', 'interrupted', 'error')),
    metrics TEXT,            -- PhaseMetrics.to_dict() as JSON (assistant replies)
    model TEXT,              -- model file that produced the reply
    finish_reason TEXT,
    error TEXT,
    reasoning TEXT NOT NULL DEFAULT '',  -- the reply's thinking; content is the answer alone
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE IF NOT EXISTS message_versions (  -- see app/core/chat/versions.py
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    after_id INTEGER NOT NULL,   -- the message the replaced turns followed (0: the chat's start)
    first_id INTEGER NOT NULL,   -- id of the version's first message: its place among the versions
    messages TEXT NOT NULL,      -- the replaced messages, rows as a JSON list
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS versions_by_place ON message_versions(conversation_id, after_id);
"""


def default_db_path() -> Path:
    return paths.data_dir() / "chats.sqlite3"


def make_private(path: Path) -> None:
    """Chats are private: create the database file 0600 before SQLite opens it (its -wal and -shm files
    take the database file's mode), and tighten a store an older version left readable by others."""
    if os.name != "posix" or str(path) == ":memory:":
        return
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # the umask can only take bits away
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)
        except FileNotFoundError:
            pass


@dataclass
class Conversation:
    id: int
    title: str
    system_prompt: str
    created: float
    updated: float
    deleted: float | None = None  # in the trash since (app/core/chat/trash.py)


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    state: str
    metrics: dict[str, Any] | None
    model: str | None
    finish_reason: str | None
    error: str | None
    created: float
    updated: float
    reasoning: str = ""  # thinking of a reasoning model's reply, shown collapsed above the answer


class ChatStore:
    """One SQLite connection, used from one thread (the GUI's). Every write commits at once."""

    def __init__(self, path: Path | None = None):
        self.path = path or default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        make_private(self.path)
        self._db = sqlite3.connect(self.path, isolation_level=None)  # autocommit; explicit BEGIN in _tx
        try:
            self._setup()
        except BaseException:
            self._db.close()  # a damaged or newer file: leave no connection behind for the caller to trip on
            raise

    def _setup(self) -> None:
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed write survives an app crash (only an OS crash can lose it).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=2000")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{self.path} was written by a newer Roofline (schema {version})")
        self._db.executescript(_SCHEMA)
        self._migrate()
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _migrate(self) -> None:
        """Add the columns a store from an older version lacks (additive only, so old rows keep their meaning)."""
        columns = {str(r[1]) for r in self._db.execute("PRAGMA table_info(messages)").fetchall()}
        if "reasoning" not in columns:
            self._db.execute("ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''")
        conv_columns = {str(r[1]) for r in self._db.execute("PRAGMA table_info(conversations)").fetchall()}
        if "deleted" not in conv_columns:
            self._db.execute("ALTER TABLE conversations ADD COLUMN deleted REAL")

    def close(self) -> None:
        self._db.close()
        self.closed = True

    closed = False

    def quick_check(self) -> str | None:
        """None when SQLite finds the file sound (`PRAGMA quick_check`), else its first complaints."""
        rows = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(5)").fetchall()]
        return None if rows == ["ok"] else "; ".join(rows)

    def restore_rows(self, conversations: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
        """Insert rows salvaged from a damaged store, keeping their ids (one transaction)."""
        # Rows salvaged from a store without the column, or with a damaged value there, keep an empty thinking.
        messages = [{**m, "reasoning": _text(m.get("reasoning"))} for m in messages]
        with self._tx() as db:
            db.executemany("INSERT OR REPLACE INTO conversations (id, title, system_prompt, created, updated)"
                           " VALUES (:id, :title, :system_prompt, :created, :updated)", conversations)
            db.executemany("INSERT OR REPLACE INTO messages (id, conversation_id, role, content, state, metrics,"
                           " model, finish_reason, error, created, updated, reasoning) VALUES (:id, :conversation_id,"
                           " :role, :content, :state, :metrics, :model, :finish_reason, :error, :created, :updated,"
                           " :reasoning)",
                           messages)

    def transaction(self) -> Any:
        """BEGIN … COMMIT (ROLLBACK on an exception) for the store's helper modules (versions, trash)."""
        return self._tx()

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only query, as tuples (for the store's helper modules)."""
        return [tuple(r) for r in self._db.execute(sql, params).fetchall()]

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @property
    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    # ------------------------------------------------------------------ conversations
    def create_conversation(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO conversations (title, system_prompt, created, updated) VALUES (?, ?, ?, ?)",
            (title, system_prompt, now, now))
        return Conversation(int(cur.lastrowid or 0), title, system_prompt, now, now)

    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        return Conversation(**dict(row)) if row else None

    def list_conversations(self, search: str = "") -> list[Conversation]:
        """Newest first; `search` matches the title or any message text (case-insensitive)."""
        if search.strip():
            pattern = "%" + search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self._db.execute(
                "SELECT * FROM conversations c WHERE c.deleted IS NULL AND (c.title LIKE ?1 ESCAPE '\\' OR EXISTS ("
                " SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?1 ESCAPE '\\'))"
                " ORDER BY c.updated DESC, c.id DESC", (pattern,)).fetchall()
        else:
            rows = self._db.execute("SELECT * FROM conversations WHERE deleted IS NULL"
                                    " ORDER BY updated DESC, id DESC").fetchall()
        return [Conversation(**dict(r)) for r in rows]

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip() or "Untitled"
        # Not an activity: renaming does not move the conversation to the top.
        self._db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        self._db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?",
                         (system_prompt, conversation_id))

    def delete_conversation(self, conversation_id: int) -> None:
        """Move a chat to the trash (Undo restores it; app/core/chat/trash.py empties it)."""
        self._db.execute("UPDATE conversations SET deleted = ? WHERE id = ?", (time.time(), conversation_id))

    def delete_conversation_forever(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def _touch(self, conversation_id: int, now: float) -> None:
        self._db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))

    # ------------------------------------------------------------------ messages
    def add_message(self, conversation_id: int, role: str, content: str = "", state: str = "complete",
                    model: str | None = None) -> Message:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}")
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}")
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, state, model, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", (conversation_id, role, content, state, model, now, now))
            self._touch(conversation_id, now)
        return Message(int(cur.lastrowid or 0), conversation_id, role, content, state, None, model, None, None,
                       now, now)

    def message(self, message_id: int) -> Message | None:
        row = self._db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        return _message(row) if row else None

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute("SELECT * FROM messages WHERE conversation_id = ? ORDER BY id",
                                (conversation_id,)).fetchall()
        return [_message(r) for r in rows]

    def append_text(self, message_id: int, text: str) -> None:
        if text:
            self._db.execute("UPDATE messages SET content = content || ?, updated = ? WHERE id = ?",
                             (text, time.time(), message_id))

    def update_message(self, message_id: int, *, content: str | None = None, state: str | None = None,
                       metrics: dict[str, Any] | None = None, finish_reason: str | None = None,
                       error: str | None = None, reasoning: str | None = None) -> None:
        if state is not None and state not in STATES:
            raise ValueError(f"unknown state {state!r}")
        sets: list[str] = ["updated = ?"]
        values: list[Any] = [time.time()]
        for column, value in (("content", content), ("state", state), ("finish_reason", finish_reason),
                              ("error", error), ("reasoning", reasoning)):
            if value is not None:
                sets.append(f"{column} = ?")
                values.append(value)
        if metrics is not None:
            sets.append("metrics = ?")
            values.append(json.dumps(metrics))
        values.append(message_id)
        self._db.execute(f"UPDATE messages SET {', '.join(sets)} WHERE id = ?", values)

    def delete_messages_from(self, conversation_id: int, message_id: int) -> int:
        """Delete this message and every later one in the conversation, keeping no version of them
        (regenerate and edit keep one: app/core/chat/versions.py)."""
        cur = self._db.execute("DELETE FROM messages WHERE conversation_id = ? AND id >= ?",
                               (conversation_id, message_id))
        return cur.rowcount

    def recover_streaming(self) -> int:
        """Replies left `streaming` by a crash of the window become `interrupted`. Returns how many."""
        cur = self._db.execute(
            "UPDATE messages SET state = 'interrupted', error = COALESCE(error, ?) WHERE state = 'streaming'",
            ("the app stopped while this reply was being written",))
        return cur.rowcount

    def metrics_series(self, conversation_id: int) -> list[dict[str, Any]]:
        """Phase metrics of the conversation's replies, oldest first (dashboard time series)."""
        rows = self._db.execute(
            "SELECT metrics FROM messages WHERE conversation_id = ? AND role = 'assistant'"
            " AND metrics IS NOT NULL ORDER BY id", (conversation_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _message(row: sqlite3.Row) -> Message:
    """A row as a Message, whatever a damaged or hand-edited store holds: text columns become text, and
    metrics that are not a JSON object are dropped (the message still shows)."""
    data = dict(row)
    try:
        metrics = json.loads(data["metrics"]) if data["metrics"] else None
    except (TypeError, ValueError, RecursionError):
        metrics = None
    data["metrics"] = metrics if isinstance(metrics, dict) else None
    data["content"] = _text(data["content"])
    data["reasoning"] = _text(data.get("reasoning"))
    for key in ("model", "finish_reason", "error"):
        data[key] = None if data[key] is None else _text(data[key])
    return Message(**data)


class StreamWriter:
    """Appends a streaming reply to the store at most every `interval` seconds (plus on flush)."""

    def __init__(self, store: ChatStore, message_id: int, interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.message_id = message_id
        self.interval = interval
        self._clock = clock
        self._pending: list[str] = []
        self._last = clock()
        self.text = ""  # everything received so far (stored or pending)

    def append(self, text: str) -> None:
        self._pending.append(text)
        self.text += text
        self.maybe_flush()

    def maybe_flush(self) -> None:
        if self._pending and self._clock() - self._last >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self.store.append_text(self.message_id, "".join(self._pending))
            self._pending.clear()
        self._last = self._clock()
