"""How the engine loads the weights: read into memory (faster decode, a repacked tensor held once) when the
file fits in the available RAM, mapped from the file when it does not (it runs, slowly, instead of swapping)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from app.engine import protocol as P
from app.engine.llama.worker import load


def test_the_default_is_to_read_the_weights_in() -> None:
    assert P.LoadConfig(model_path="m.gguf").use_mmap is False


@pytest.mark.parametrize(("available", "fits"), [(10_000, True), (1_200, False), (1_000, False)])
def test_a_file_is_read_in_only_when_it_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, available: int,
                                              fits: bool) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"\0" * 1000)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=available))
    assert load.fits_in_memory(str(f)) is fits  # under 80 % of what is available
