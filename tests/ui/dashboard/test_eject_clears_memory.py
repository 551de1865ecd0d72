"""Eject (the toolbar's, or Model ▸ Eject) takes the model's numbers off the dashboard and the status bar: the
KV card and the Memory box say plainly that no model is loaded, the status bar drops the KV cells, and the next
load brings them back. Played through the fake engine, Eject clicked in the window's toolbar."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton

from app.engine import protocol as P
from chat_drive import done, send, tokens
from fake_engine import loaded_event

pytestmark = pytest.mark.gui


def _stats(win, used: int, loaded: bool = True) -> None:  # type: ignore[no-untyped-def]
    allocated = 512 if loaded else 0
    win.engine._dispatch(P.Stats(rss_bytes=300 << 20, kv_cells_used=used, kv_cells_allocated=allocated,
                                 kv_bytes_used=used * 1024, kv_bytes_allocated=allocated * 1024, loaded=loaded))


def _click_eject(win, qtbot) -> None:  # type: ignore[no-untyped-def]
    [button] = [tool for tool in win.findChildren(QToolButton)
                if tool.defaultAction() is win.model_manager.eject_action]
    assert button.isEnabled()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_eject_says_no_model_and_the_next_load_brings_the_numbers_back(win, qtbot) -> None:  # type: ignore[no-untyped-def]
    dash = win.dashboard
    rid = send(win, "hello")
    tokens(win, rid, "a", "b")
    done(win, rid, tokens=34, prompt_tokens=40)
    _stats(win, 73)
    assert dash.card_kv.value.text() == "73 tok" and "KV 73/512" in win.status_line.part("memory")
    _click_eject(win, qtbot)
    assert win.engine.loaded_info is None
    assert (dash.card_kv.value.text(), dash.card_kv.detail.text()) == ("—", "no model loaded")
    assert dash.kv_label.text() == "No model loaded." and dash.kv_bar.value() == 0
    assert "KV" not in win.status_line.part("memory")
    _stats(win, 0, loaded=False)  # the engine process lives on: its next stats hold no model
    assert dash.kv_label.text() == "No model loaded." and dash.card_kv.value.text() == "—"
    assert "KV" not in win.status_line.part("memory") and "RSS" in win.status_line.part("memory")
    win.engine._dispatch(loaded_event())  # the next load: the chat's tokens and the engine's cache again
    _stats(win, 0)
    assert dash.card_kv.value.text() == "73 tok" and dash.kv_label.text().startswith("The engine's cache now:")
    assert "KV 0/512" in win.status_line.part("memory")


def test_eject_takes_the_last_models_roofline_off(win, qtbot) -> None:  # type: ignore[no-untyped-def]
    """The Roofline box said "Load a model…" after Eject but kept the ejected model's roof and points drawn."""
    box = win.dashboard.roofline
    rid = send(win, "hello")
    tokens(win, rid, "a", "b")
    done(win, rid, tokens=34, prompt_tokens=40)
    qtbot.waitUntil(lambda: len(box.roof_decode.getData()[0] or []) == 1, timeout=5000)
    _click_eject(win, qtbot)
    qtbot.waitUntil(lambda: box.roof_label.text().startswith("Load a model"), timeout=5000)
    assert box.roof_decode.getData()[0] is None or len(box.roof_decode.getData()[0]) == 0
    assert box.roof_prefill.getData()[0] is None or len(box.roof_prefill.getData()[0]) == 0
    assert box.roof_curve.getData()[0] is None or len(box.roof_curve.getData()[0]) == 0
    assert not box.roof_empty.isHidden()
