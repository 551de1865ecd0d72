"""Unsent message drafts, one per conversation, kept in a small JSON file beside the chat store.

A draft is what the user typed and has not sent yet. It is worth keeping across a restart, but it is not a
message: it never enters the chat store's tables, and a damaged or missing file just means no drafts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.core.files import atomic_write

MAX_DRAFT_CHARS = 1_000_000  # a pasted book is kept; anything larger is not a draft worth a slow start
MAX_DRAFTS = 500  # conversations with a draft; the oldest are dropped beyond that


def drafts_path(store_path: str | os.PathLike[str]) -> Path:
    """Where the drafts of the chat store at `store_path` live."""
    return Path(store_path).with_name("chat-drafts.json")


class DraftBook:
    def __init__(self, path: Path):
        self.path = path
        self._drafts: dict[int, str] = {}
        self._dirty = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, str) and value and str(key).isdigit():
                    self._drafts[int(key)] = value[:MAX_DRAFT_CHARS]

    def get(self, conversation_id: int) -> str:
        return self._drafts.get(conversation_id, "")

    def put(self, conversation_id: int, text: str) -> None:
        text = text[:MAX_DRAFT_CHARS]
        if not text.strip():
            text = ""
        if self._drafts.get(conversation_id, "") == text:
            return
        self._drafts.pop(conversation_id, None)  # re-inserted last: the newest drafts survive MAX_DRAFTS
        if text:
            self._drafts[conversation_id] = text
            while len(self._drafts) > MAX_DRAFTS:
                del self._drafts[next(iter(self._drafts))]
        self._dirty = True

    def forget(self, conversation_id: int) -> None:
        self.put(conversation_id, "")

    def save(self) -> bool:
        """Write the drafts if they changed (atomically: a crash mid-write keeps the previous file). False if
        the file could not be written (the drafts stay in memory)."""
        if not self._dirty:
            return True
        data = json.dumps({str(k): v for k, v in self._drafts.items()}).encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Drafts are chat text: private to the user, like the chat store (0600).
            atomic_write.write_bytes(self.path, data, 0o600)
        except OSError:
            return False
        self._dirty = False
        return True
