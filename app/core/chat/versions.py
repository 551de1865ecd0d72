"""Earlier versions of a conversation's turns: Regenerate and Edit keep what they replace, ‹1/3› browses.

A chat is one line of messages (ordered by id) plus, for each place where it was regenerated or edited,
the lines it used to continue with. A place is named by the message the replaced turns followed (`after_id`,
0 for the chat's start); message ids are never reused, so that names one branch point even when versions
nest (a version kept inside another comes back with it). Switching version swaps: the shown turns become a
stored version and the chosen one returns to the messages table with its own ids, which are all larger than
`after_id`, so ordering by id still gives the line. The conversation continues from the version shown,
because the engine's history is read from the messages table.

A version row that cannot be read (damaged JSON, a hand-edited store) is left out of the count, never fatal.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from app.core.chat.store import ChatStore

_COLUMNS = ("id", "conversation_id", "role", "content", "state", "metrics", "model", "finish_reason", "error",
            "reasoning", "created", "updated")


@dataclass(frozen=True)
class VersionPlace:
    """Where a message stands among the versions of its place: `index` of `count`, both from 1."""
    index: int
    count: int


def _after_id(store: ChatStore, conversation_id: int, message_id: int) -> int:
    row = store.query(
        "SELECT MAX(id) FROM messages WHERE conversation_id = ? AND id < ?", (conversation_id, message_id))
    return int(row[0][0] or 0)


def _tail_rows(db: sqlite3.Connection, conversation_id: int, from_id: int) -> list[dict[str, Any]]:
    rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM messages WHERE conversation_id = ? AND id >= ?"
                      " ORDER BY id", (conversation_id, from_id)).fetchall()
    return [dict(zip(_COLUMNS, tuple(r), strict=False)) for r in rows]


def replace_from(store: ChatStore, conversation_id: int, message_id: int) -> int:
    """Keep this message and every later one as a version of their place, then remove them from the chat
    (Regenerate: the last reply; Edit: the edited message and what followed it). Returns how many."""
    after = _after_id(store, conversation_id, message_id)
    with store.transaction() as db:
        return _keep_and_remove(db, conversation_id, after, message_id)


def _keep_and_remove(db: sqlite3.Connection, conversation_id: int, after: int, message_id: int) -> int:
    tail = _tail_rows(db, conversation_id, message_id)
    if tail:
        db.execute("INSERT INTO message_versions (conversation_id, after_id, first_id, messages, created)"
                   " VALUES (?, ?, ?, ?, ?)", (conversation_id, after, tail[0]["id"], json.dumps(tail), time.time()))
        db.execute("DELETE FROM messages WHERE conversation_id = ? AND id >= ?", (conversation_id, message_id))
    return len(tail)


def _stored(store: ChatStore, conversation_id: int, after: int) -> list[tuple[int, int, list[dict[str, Any]]]]:
    """(row id, first message id, rows) of each readable stored version at this place."""
    out = []
    for row_id, first_id, text in store.query(
            "SELECT id, first_id, messages FROM message_versions WHERE conversation_id = ? AND after_id = ?"
            " ORDER BY first_id", (conversation_id, after)):
        rows = _readable(text, after)
        if rows is not None and isinstance(first_id, int):
            out.append((int(row_id), first_id, rows))
    return out


def _readable(text: Any, after: int) -> list[dict[str, Any]] | None:
    """The stored rows, or None when they are not what replace_from wrote."""
    try:
        rows = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(rows, list) or not rows:
        return None
    for r in rows:
        if (not isinstance(r, dict) or set(r) != set(_COLUMNS) or not isinstance(r["id"], int)
                or r["id"] <= after or r["role"] not in ("user", "assistant", "system")
                or not isinstance(r["content"], str) or not isinstance(r["created"], (int, float))
                or not isinstance(r["updated"], (int, float))):
            return None
    return rows


def places(store: ChatStore, conversation_id: int) -> dict[int, VersionPlace]:
    """message id -> its place among versions, for the shown messages that have earlier or later versions."""
    ids = [m.id for m in store.messages(conversation_id)]
    counted: dict[int, list[int]] = {}
    for after, first_id in store.query(
            "SELECT after_id, first_id FROM message_versions WHERE conversation_id = ?", (conversation_id,)):
        counted.setdefault(after, []).append(first_id)
    out: dict[int, VersionPlace] = {}
    for i, mid in enumerate(ids):
        after = ids[i - 1] if i else 0
        if after in counted:
            stored = _stored(store, conversation_id, after)
            if stored:
                order = sorted([first for _, first, _ in stored] + [mid])
                out[mid] = VersionPlace(order.index(mid) + 1, len(order))
    return out


def switch(store: ChatStore, conversation_id: int, message_id: int, index: int) -> bool:
    """Show version `index` (from 1) of the place `message_id` stands at: the shown turns from there on are
    kept as a version and the chosen one takes their place. False when there is no such version."""
    after = _after_id(store, conversation_id, message_id)
    stored = _stored(store, conversation_id, after)
    order = sorted([(first, row_id) for row_id, first, _ in stored] + [(message_id, 0)])
    if not 1 <= index <= len(order) or order[index - 1][1] == 0:
        return False
    row_id = order[index - 1][1]
    rows = next(r for rid, _, r in stored if rid == row_id)
    with store.transaction() as db:
        _keep_and_remove(db, conversation_id, after, message_id)
        db.execute("DELETE FROM message_versions WHERE id = ?", (row_id,))
        for r in rows:
            # A version was never kept mid-stream; a hand-edited "streaming" one must not look alive.
            state = r["state"] if r["state"] in ("complete", "interrupted", "error") else "interrupted"
            db.execute(f"INSERT OR REPLACE INTO messages ({', '.join(_COLUMNS)}) VALUES"
                       f" ({', '.join('?' for _ in _COLUMNS)})",
                       tuple({**r, "conversation_id": conversation_id, "state": state}[c] for c in _COLUMNS))
    return True
