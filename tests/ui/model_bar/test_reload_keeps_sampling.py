"""Reload, and Eject then Reload, keep the sampling panel as the user set it for the model in use: the
model's preset (max tokens 60) is put there when the model is chosen, not again over the user's 400."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.chat.store import ChatStore
from app.core.config import settings as S
from app.core.models.presets import set_preset
from app.engine import protocol as P
from fake_engine import loaded_event
from fake_window import make_window

pytestmark = pytest.mark.gui


@pytest.fixture
def win_model(qtbot, tmp_path: Path):  # type: ignore[no-untyped-def]
    model = tmp_path / "p-Q4_K_M.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 100)  # never opened: the fake engine only records the Load
    settings = S.Settings()
    set_preset(settings, model, S.ModelPreset(sampling=S.PresetSampling(max_tokens=60, temperature=0.2)))
    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store, settings=settings)
    win.show()
    win.load_model(model)
    win.engine._dispatch(_loaded(model))
    yield win, model
    win.close()
    store.close()


def _loaded(model: Path) -> P.Loaded:
    return dataclasses.replace(loaded_event(), model_path=str(model))


def _loads(win) -> int:  # type: ignore[no-untyped-def]
    return len([c for c in win.engine.client.sent if isinstance(c, P.Load)])


def test_reload_keeps_the_panels_values(win_model) -> None:  # type: ignore[no-untyped-def]
    win, model = win_model
    panel = win.sampling_panel
    assert panel.max_tokens.value() == 60  # the preset's, on choosing the model
    panel.max_tokens.setValue(400)
    panel.temperature.setValue(0.9)
    loads = _loads(win)
    assert win.model_manager.reload()
    assert _loads(win) == loads + 1 and win.engine.client.sent[-1].config.model_path == str(model)
    assert panel.max_tokens.value() == 400 and panel.temperature.value() == pytest.approx(0.9)


def test_eject_then_reload_keeps_the_panels_values(win_model) -> None:  # type: ignore[no-untyped-def]
    win, model = win_model
    panel = win.sampling_panel
    panel.max_tokens.setValue(400)
    assert win.model_manager.eject()
    assert panel.max_tokens.value() == 400
    assert win.model_manager.reload()
    win.engine._dispatch(_loaded(model))
    assert panel.max_tokens.value() == 400


def test_choosing_the_model_again_after_another_applies_its_preset(win_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    win, model = win_model
    other = tmp_path / "o-Q8_0.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 100)
    win.sampling_panel.max_tokens.setValue(400)
    win.load_model(other)
    win.load_model(model)  # a model chosen anew: its preset again
    assert win.sampling_panel.max_tokens.value() == 60
