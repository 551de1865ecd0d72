"""The banner's news about the model in use holds only while that model is in use: "Still using X" after a
failed connection, or "Loading X again" after a failed load, goes once the user is on another model;
a broken settings file is named there, kept aside as a backup."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app.core.config import settings as S
from app.engine import protocol as P
from fake_engine import loaded_event
from fake_window import make_window

pytestmark = pytest.mark.gui


def _remote() -> P.Loaded:
    return dataclasses.replace(loaded_event(model_desc="fake-thinker (remote)"), model_path="http://127.0.0.1:9/v1",
                               chat_template_source="server", chat_template_name="server")


def _local(tmp_path: Path) -> tuple[Path, P.Loaded]:
    model = tmp_path / "local-Q4_K_M.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 100)  # never opened: the fake engine only records the Load
    return model, dataclasses.replace(loaded_event(), model_path=str(model))


def test_still_using_the_remote_model_goes_when_back_on_the_local_one(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window.engine._dispatch(_remote())
    window.engine._dispatch(P.Error(None, "connect_failed", "connection refused"))  # another server, refused
    assert window.banner.isVisibleTo(window) and "Still using fake-thinker (remote)" in window.banner.text()
    model, loaded = _local(tmp_path)
    window.load_model(model)  # back on the local model
    window.engine._dispatch(loaded)
    assert not window.banner.isVisibleTo(window)


def test_loading_the_previous_model_again_keeps_the_why_until_another_model(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, loaded = _local(tmp_path)
    window.load_model(model)
    window.engine._dispatch(loaded)
    window.engine.restoring = P.LoadConfig(model_path=str(model))  # the engine loads it again after the failure
    window.engine._dispatch(P.Error(None, "load_failed", "not a GGUF file."))
    window.engine.restoring = None
    window.engine._dispatch(loaded)  # the previous model is back: the banner still says why the new one failed
    assert window.banner.isVisibleTo(window) and "Loading local-Q4_K_M.gguf again" in window.banner.text()
    window.engine._dispatch(_remote())  # then another model: that news is out of date
    assert not window.banner.isVisibleTo(window)


def test_news_about_no_model_stays(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window.banner.show_message("The server stopped: out of memory")
    _model, loaded = _local(tmp_path)
    window.engine._dispatch(loaded)
    assert window.banner.isVisibleTo(window) and window.banner.text() == "The server stopped: out of memory"


def test_broken_settings_file_warns_in_window(qtbot, roofline_home):

    S.settings_path().write_text("{\"n_ctx\": ")
    window = make_window(qtbot, as_started=True)
    assert window.banner.isVisibleTo(window) and "could not be used" in window.banner.text()
    assert not window.banner.restart_button.isVisibleTo(window)
    backups = list((roofline_home / "config").glob("settings.json.bak-*"))
    assert len(backups) == 1 and backups[0].read_text() == "{\"n_ctx\": "
    assert window.settings.n_ctx == 4096
    window.sampling_panel.max_tokens.setValue(77)
    window.close()
    saved = json.loads(S.settings_path().read_text())
    assert saved["sampling"]["max_tokens"] == 77 and saved["window"]["geometry"]


def test_a_load_whose_gpu_layers_ran_on_the_cpu_says_so_until_another_model(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, loaded = _local(tmp_path)
    window.load_model(model)
    placed = dataclasses.replace(loaded, gpu_layers_requested=-1, gpu_layers_placed=19, gpu_layers_total=19)
    window.engine._dispatch(placed)  # every layer where it was asked: nothing to say
    assert not window.banner.isVisibleTo(window)
    window.engine._dispatch(dataclasses.replace(placed, gpu_layers_placed=0))  # the build found no device
    assert window.banner.isVisibleTo(window)
    assert window.banner.text().startswith("Only 0 of 19 layers are on the GPU (the plan was 19)")
    window.engine._dispatch(_remote())
    assert not window.banner.isVisibleTo(window)


def test_the_first_start_note_stays_small_at_800_by_600(window, qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from app.core.models import default_model
    from app.ui.window.onboarding import DEMO_MODEL_NOTE

    window.resize(1600, 1000)
    qtbot.wait(50)
    window.resize(800, 600)  # as a user narrows the window (the panels give the chat room first)
    qtbot.wait(50)
    loaded = window.engine.loaded_info
    monkeypatch.setattr(default_model, "default_model_path", lambda ensure=True: Path(loaded.model_path))
    window.engine.loaded.emit(loaded)  # the first start's note, on the demo model
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(30)
    banner, label = window.banner, window.banner.label
    assert banner.isVisible() and banner.text() == DEMO_MODEL_NOTE
    line = label.fontMetrics().lineSpacing()
    assert label.height() <= 3 * line + 4, f"{label.text()!r} takes {label.height() / line:.1f} lines"
    assert banner.height() <= 3 * line + 30 and window.message_view.height() >= 250
    if label.text() != DEMO_MODEL_NOTE:  # cut short: the rest is one click away
        assert label.text().endswith("…") and banner.more_button.isVisible()
        qtbot.mouseClick(banner.more_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: label.text() == DEMO_MODEL_NOTE and label.height() > 3 * line)
        assert banner.more_button.text() == "Less"
        qtbot.mouseClick(banner.more_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: label.height() <= 3 * line + 4)
    assert "Discover" in label.text()  # what to do about it is in the lines shown
