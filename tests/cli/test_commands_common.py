"""Commands that read a model's header share one way of saying it cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.commands._common import inspect_or_fail


def test_unreadable_model_is_one_line_and_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    assert inspect_or_fail(bad) is None
    err = capsys.readouterr().err
    assert err.startswith(f"roofline: {bad}: ") and err.count("\n") == 1
    for command in (["info"], ["recommend"]):
        assert main([*command, "-m", str(bad)]) == 1
        assert capsys.readouterr().err == err
