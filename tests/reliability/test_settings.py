"""A damaged or future settings file never stops the app: defaults, a warning, the old file kept byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.config import settings as S
from fake_window import make_window
from reliability_plugin import record

DAMAGED: dict[str, bytes] = {
    "empty": b"",
    "truncated json": b'{"version": 1, "n_ctx": 40',
    "binary garbage": bytes(range(256)) * 4,
    "invalid utf-8": b'{"system_prompt": "\xff\xfe\xfd"}',
    "nul bytes": b"\0" * 512,
    "json array": b"[1, 2, 3]",
    "json string": b'"settings"',
    "json null": b"null",
    "wrong types": b'{"version": 1, "n_ctx": "big", "sampling": [1, 2]}',
    "out of range": b'{"version": 1, "n_ctx": 3, "sampling": {"temperature": -4}}',
    "bad kv type": b'{"version": 1, "kv_cache_type": "q1_0"}',
    "infinite number": b'{"version": 1, "threads": 1e400}',
    "more threads than llama.cpp starts": b'{"version": 1, "threads": 1024}',
    "infinite version": b'{"version": 1e400}',
    "nan": b'{"version": 1, "sampling": {"top_p": NaN}}',
    "version not a number": b'{"version": "one"}',
    "version null": b'{"version": null}',
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "nul in a path": b'{"version": 1, "models_dir": "/tmp/\\u0000models"}',
    "utf-16 with bom": '{"version": 1}'.encode("utf-16"),
}
FUTURE: dict[str, bytes] = {
    "version 2": b'{"version": 2, "n_ctx": 8192}',
    "version 99 with new fields": b'{"version": 99, "n_ctx": 8192, "quantum_mode": true, "sampling": {"mirostat": 3}}',
}


def _defaults() -> dict[str, Any]:
    return S.Settings().model_dump()


@pytest.mark.parametrize("name", list(DAMAGED) + list(FUTURE))
def test_unusable_settings_file_gives_defaults_a_warning_and_a_backup(name: str) -> None:
    raw = {**DAMAGED, **FUTURE}[name]
    path = S.settings_path()
    path.write_bytes(raw)
    result = S.load_settings()
    assert result.settings.model_dump() == _defaults()
    assert result.warning and "defaults are in effect" in result.warning
    if name in FUTURE:
        assert "newer Roofline" in result.warning
    # The file is moved aside, not destroyed: the backup holds exactly the old bytes.
    assert result.backup is not None and result.backup.name in result.warning
    assert result.backup.read_bytes() == raw
    assert not path.exists()
    # The app goes on: saving and loading again is clean, and the backup is still there.
    S.save_settings(result.settings)
    again = S.load_settings()
    assert again.warning is None and again.settings.model_dump() == _defaults()
    assert result.backup.read_bytes() == raw
    record("settings files recovered")


def test_each_damaged_load_keeps_its_own_backup() -> None:
    path = S.settings_path()
    backups = []
    for raw in (b"{", b"[", b"{{"):
        path.write_bytes(raw)
        result = S.load_settings()
        assert result.backup is not None
        backups.append(result.backup)
    assert [b.read_bytes() for b in backups] == [b"{", b"[", b"{{"]  # none overwrote another


def test_a_valid_older_file_is_read_not_replaced() -> None:
    path = S.settings_path()
    path.write_text(json.dumps({"n_ctx": 8192}))  # no version: the first format
    result = S.load_settings()
    assert result.warning is None and result.settings.n_ctx == 8192 and path.exists()


@pytest.mark.gui
def test_window_starts_with_defaults_and_says_why(qtbot: Any, tmp_path: Path) -> None:
    from app.core.chat.store import ChatStore

    S.settings_path().write_bytes(b'{"version": 1e400}')  # crashed load_settings before the fix
    store = ChatStore(tmp_path / "c.sqlite3")
    window = make_window(qtbot, store=store, as_started=True)
    assert window.settings.model_dump() == _defaults()
    assert window.banner.isVisibleTo(window)
    assert "could not be used" in window.banner.text()
    assert list(S.settings_path().parent.glob("settings.json.bak-*"))
