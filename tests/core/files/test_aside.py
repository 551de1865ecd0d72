"""Damaged or unusable files are kept under a free name beside them (app.core.files.aside), never overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.chat import store_recovery
from app.core.config import settings
from app.core.files import aside


def test_aside_names_never_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aside.time, "strftime", lambda fmt: "20261130-120000")
    target = tmp_path / "settings.json"
    first = aside.aside_name(target, "bak")
    assert first.name == "settings.json.bak-20261130-120000"
    first.write_text("x")
    assert aside.aside_name(target, "bak").name == "settings.json.bak-20261130-120000-1"


def test_settings_and_chat_store_name_their_backups_through_it() -> None:
    for module in (settings, store_recovery):
        assert module.aside_name is aside.aside_name
