"""Every JSON/text store is written through app.core.files.atomic_write: the old content or the new, never half."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from app.core.files import atomic_write

APP = Path(__file__).resolve().parents[3] / "app"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "stores"
    folder.mkdir()
    target = folder / "store.json"
    atomic_write.write_json(target, {"a": 1})
    with pytest.raises(TypeError):
        atomic_write.write_json(target, {"a": object()})  # not JSON: fails before anything is written
    assert target.read_text() == '{\n  "a": 1\n}'

    def failing_replace(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        atomic_write.write_text(target, "new")
    monkeypatch.undo()
    assert target.read_text() == '{\n  "a": 1\n}'
    assert sorted(p.name for p in folder.iterdir()) == ["store.json"]


def test_modes_are_kept(tmp_path: Path) -> None:
    private = atomic_write.write_text(tmp_path / "private", "x", 0o600)
    assert private.stat().st_mode & 0o777 == 0o600
    old = os.umask(0o022)
    try:
        public = atomic_write.write_text(tmp_path / "public", "x")
    finally:
        os.umask(old)
    assert public.stat().st_mode & 0o777 == 0o644
    stale = atomic_write.temp_path(tmp_path / "again")
    stale.write_text("stale")
    os.chmod(stale, 0o666)  # a leftover temporary must not lend its mode to the new file
    assert atomic_write.write_text(tmp_path / "again", "y", 0o600).stat().st_mode & 0o777 == 0o600


def test_no_module_renames_a_temporary_file_of_its_own() -> None:
    """One helper: a second write-then-rename copy in app/ would drift (modes, encodings, clean-up)."""
    own = {"atomic_write.py"}
    # files that rename something other than a small text store: a model assembled or quantized into
    # place, a download's .part, a store moved aside as a backup
    allowed = {"default_model.py", "downloads.py", "quantize.py", "store_recovery.py", "settings.py",
               "library.py", "zoo.py"}
    offenders = []
    for path in APP.rglob("*.py"):
        if path.name in own:
            continue
        text = path.read_text(encoding="utf-8")
        if path.name not in allowed and re.search(r"\b(os|tmp)\.replace\(", text):
            offenders.append(str(path.relative_to(APP)))
    assert offenders == []
