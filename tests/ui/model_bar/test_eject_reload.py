"""One model manager in the toolbar: every library model with size, quantization and fit verdict; Eject and
Reload, asking before they stop a reply. Runs on the fake engine (no model process); the models are zoo files
(real headers, sparse)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from app.core.bench.zoo import zoo_path
from app.core.chat.store import ChatStore
from app.core.config.settings import Settings
from app.core.predict.recommend import CPU, FULL, NONE, PARTIAL
from app.engine import protocol as P
from fake_window import make_window

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot, tmp_path: Path):
    from fake_engine import loaded_event

    models = tmp_path / "models"
    model = zoo_path("qwen2.5-0.5b", "Q4_K_M", models / "quantized")
    store = ChatStore(tmp_path / "chats.sqlite3")
    settings = Settings()
    settings.models_dir = str(models)
    win = make_window(qtbot, store=store, settings=settings)
    win.engine._dispatch(dataclasses.replace(loaded_event(), model_path=str(model)))
    win.show()
    yield win, model
    win.close()
    store.close()


def test_selector_lists_size_quant_and_fit_for_each_model(window, qtbot) -> None:
    from app.ui.model_bar.tips import ModelTips

    win, model = window
    win._populate_models()
    tips = win.model_combo.findChild(ModelTips)
    qtbot.waitUntil(lambda: not tips.pending, timeout=30_000)
    text = win.model_combo.itemText(win.model_combo.findData(str(model)))
    verdicts = "|".join(re.escape(v) for v in (FULL, PARTIAL, CPU, NONE))
    assert re.fullmatch(rf"quantized/{re.escape(model.name)} — \d+\.\d MiB · Q4_K_M · ({verdicts})", text), text
    assert win.model_combo.itemText(win.model_combo.findData("__open__")) == "Open GGUF file…"


def test_eject_frees_the_model_and_reload_loads_it_again(window, qtbot) -> None:
    win, model = window
    manager = win.model_manager
    assert manager.eject_action.isEnabled() and manager.reload_action.isEnabled()
    assert manager.eject()
    assert isinstance(win.engine.client.sent[-1], P.Unload)
    assert win.engine.loaded_info is None and not manager.eject_action.isEnabled()
    assert "no model loaded" in win.model_info.full_text()
    win.new_chat()
    win.input.setPlainText("hello?")
    win.submit()
    assert win.hint_label.text() == "Not sent: no model is loaded."
    assert manager.reload()
    load = win.engine.client.sent[-1]
    assert isinstance(load, P.Load) and load.config.model_path == str(model)


def test_eject_and_reload_ask_before_stopping_a_reply(window, monkeypatch) -> None:
    win, _ = window
    win.new_chat()
    win.input.setPlainText("tell me a story")
    win.submit()
    assert win.session.busy
    answers: list[QMessageBox.StandardButton] = [QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes]
    asked: list[str] = []

    def answer(box: QMessageBox) -> int:
        asked.append(box.text())
        return int(answers.pop(0).value)

    monkeypatch.setattr(QMessageBox, "exec", answer)
    sent = len(win.engine.client.sent)
    assert not win.model_manager.reload()
    assert len(win.engine.client.sent) == sent  # No: the reply goes on, nothing sent
    assert win.model_manager.eject()
    assert [type(c) for c in win.engine.client.sent[sent:]] == [P.Cancel, P.Unload]
    assert asked == ["A reply is being written. Stop it and reload the model?",
                     "A reply is being written. Stop it and eject the model?"]


def test_selector_lists_the_hugging_face_cache_like_the_library(window, tmp_path: Path, monkeypatch) -> None:
    from app.core.models import library

    win, _ = window
    cache = tmp_path / "hf" / "models--org--repo" / "snapshots" / "abc"
    cache.mkdir(parents=True)
    (cache / "cached-Q8_0.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    assert str(cache / "cached-Q8_0.gguf") in {str(m.path) for m in library.list_models()}
    win._populate_models()
    data = [win.model_combo.itemData(i) for i in range(win.model_combo.count())]
    assert str(cache / "cached-Q8_0.gguf") in data
