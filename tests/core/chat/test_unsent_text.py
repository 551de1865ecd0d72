"""The drafts file: round trip, private permissions, a damaged file means no drafts (never an error)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from app.core.chat.unsent import MAX_DRAFTS, DraftBook, drafts_path


def test_drafts_round_trip_privately(tmp_path: Path) -> None:
    path = drafts_path(tmp_path / "chats.sqlite3")
    book = DraftBook(path)
    book.put(3, "half a question")
    book.put(4, "   ")  # only blanks: no draft
    assert book.save()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = DraftBook(path)
    assert again.get(3) == "half a question" and again.get(4) == ""
    again.forget(3)
    again.save()
    assert DraftBook(path).get(3) == ""


def test_a_damaged_drafts_file_means_no_drafts(tmp_path: Path) -> None:
    path = tmp_path / "chat-drafts.json"
    for junk in (b"{not json", b"[1, 2]", b'{"x": "y", "5": 7, "6": "kept"}', b"\xff\xfe"):
        path.write_bytes(junk)
        book = DraftBook(path)
        assert book.get(5) == ""
    path.write_bytes(b'{"x": "y", "5": 7, "6": "kept"}')
    book = DraftBook(path)
    assert book.get(5) == "" and book.get(6) == "kept"


def test_only_the_newest_drafts_are_kept(tmp_path: Path) -> None:
    book = DraftBook(tmp_path / "chat-drafts.json")
    for i in range(MAX_DRAFTS + 10):
        book.put(i, f"draft {i}")
    assert book.get(0) == "" and book.get(MAX_DRAFTS + 9) == f"draft {MAX_DRAFTS + 9}"
