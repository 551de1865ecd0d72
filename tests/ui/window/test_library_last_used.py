"""The Library's "Last used" follows the window without Refresh: loading a model, or a reply of the model in use
ending, shows the new time in its row at once (found in QA under Xvfb: it said "never", or the time of an
older load, until Refresh), and the time is kept for the next listing. Fake engine, synthetic GGUF files."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.core.config import paths
from app.core.models import library
from chat_drive import done, send
from fake_engine import loaded_event
from fake_window import open_models_page
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui

LONG_AGO = datetime(2001, 1, 1, 12, 0, tzinfo=UTC)






def _last_used(page: Any, path: Path) -> str:
    """The "Last used" cell of `path`'s row, as the table shows it."""
    table = page.library_model
    row = next(i for i, m in enumerate(table.rows) if Path(m.path) == path)
    return str(table.data(table.index(row, table.HEADERS.index("Last used"))))


def _load(win: Any, path: Path) -> None:
    win.load_model(path)  # as chosen in the toolbar's selector
    win.engine._dispatch(dataclasses.replace(loaded_event(), model_path=str(path)))


def _today() -> str:
    return datetime.now(UTC).astimezone().strftime("%Y-%m-%d")


def test_loading_a_model_shows_its_last_use_without_refresh(models_window: Any, qtbot: Any) -> None:
    model = write_synthetic_gguf(paths.models_dir() / "tiny-F32.gguf", n_layers=1)
    page = open_models_page(models_window, qtbot, listed=True)
    assert _last_used(page, model) == "never"
    models_window.pages.setCurrentWidget(models_window.chat_page)
    _load(models_window, model)
    assert _last_used(page, model).startswith(_today()), "the Library still says it was never used"


def test_a_reply_shows_the_models_last_use_without_refresh(models_window: Any, qtbot: Any) -> None:
    model = write_synthetic_gguf(paths.models_dir() / "tiny-F32.gguf", n_layers=1)
    _load(models_window, model)
    library.mark_used(model, LONG_AGO)  # loaded long ago, and in use since
    page = open_models_page(models_window, qtbot, listed=True)
    assert _last_used(page, model).startswith("2001-01-01")
    models_window.pages.setCurrentWidget(models_window.chat_page)
    rid = send(models_window, "hello")
    done(models_window, rid)
    assert _last_used(page, model).startswith(_today()), "the Library still shows the load of long ago"
    # kept: the next listing (Refresh, or the next start) reads the same
    qtbot.waitUntil(lambda: library._load_used().get(str(model.absolute()), "").startswith(
        datetime.now(UTC).strftime("%Y-%m-%d")), timeout=10000)
    page.refresh_library()
    qtbot.waitUntil(lambda: not page.busy(), timeout=20000)
    assert _last_used(page, model).startswith(_today())
