"""The chats' trash: a deleted chat stays restorable (Undo, the Trash view) until it is emptied.

Deleting only marks the conversation (`conversations.deleted`); emptying removes the rows for good (its
messages and versions go with it, by the foreign keys' cascade). Chats are emptied after `KEEP_DAYS` when
the window starts, or at once from the Trash view.
"""

from __future__ import annotations

import time

from app.core.chat.store import ChatStore, Conversation

KEEP_DAYS = 30


def trashed(store: ChatStore) -> list[Conversation]:
    """Chats in the trash, most recently deleted first."""
    rows = store.query("SELECT id, title, system_prompt, created, updated, deleted FROM conversations"
                       " WHERE deleted IS NOT NULL ORDER BY deleted DESC, id DESC")
    return [Conversation(int(r[0]), str(r[1]), str(r[2]), float(r[3]), float(r[4]), float(r[5])) for r in rows]


def restore(store: ChatStore, conversation_id: int) -> None:
    """Undo a delete: the chat is back in the list, in its old place (its last activity is unchanged)."""
    with store.transaction() as db:
        db.execute("UPDATE conversations SET deleted = NULL WHERE id = ?", (conversation_id,))


def empty(store: ChatStore, older_than_days: float | None = None, now: float | None = None) -> int:
    """Remove trashed chats for good: all of them, or those deleted more than `older_than_days` ago."""
    cutoff = float("inf") if older_than_days is None else (now or time.time()) - older_than_days * 86400
    with store.transaction() as db:
        cur = db.execute("DELETE FROM conversations WHERE deleted IS NOT NULL AND deleted <= ?", (cutoff,))
    return cur.rowcount
