"""Prompt lookup as a chat setting: the checkbox reaches the engine, the dashboard shows acceptance."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core.metrics.phase import PhaseMetrics
from fake_window import make_window

pytestmark = pytest.mark.gui


def test_decode_card_shows_the_draft_acceptance(qtbot) -> None:
    win = make_window(qtbot, as_started=True)
    m = PhaseMetrics(prompt_tokens=20, prefill_tokens=20, prefill_ms=50.0, decode_tokens=30, decode_ms=600.0,
                     generated_tokens=31, itl_ms=[20.0] * 30, draft_tokens=40, draft_accepted=26)
    win.dashboard._show_message(m)
    assert "lookup 65 % accepted" in win.dashboard.card_decode.detail.text()
    win.dashboard._show_message(PhaseMetrics(decode_tokens=3, decode_ms=30.0))
    assert "lookup" not in win.dashboard.card_decode.detail.text()


@pytest.mark.model
def test_checkbox_sends_prompt_lookup_to_the_engine(qtbot, default_model) -> None:
    win = make_window(qtbot, as_started=True)
    win.show()
    win.measure_bandwidth_on_load = False
    win.sampling_panel.max_tokens.setValue(12)
    win.sampling_panel.temperature.setValue(0.0)
    win.sampling_overrides = {"ignore_eos": True}
    sent = []
    original = win.engine.generate
    win.engine.generate = lambda req: (sent.append(req), original(req))[1]  # type: ignore[method-assign]
    win.load_default_model()
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None, timeout=90_000)
    win.sampling_panel.prompt_lookup.setChecked(True)
    win.input.setPlainText("red green blue red green blue red green blue red green blue")
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not win.session.busy, timeout=60_000)
    assert sent and sent[-1].prompt_lookup is True
    reply = win.store.messages(win.session.conversation.id)[-1]
    assert reply.role == "assistant" and reply.state == "complete" and reply.content
    win.close()


def test_a_reply_whose_prompt_was_all_cached_shows_no_prefill_rate(qtbot) -> None:
    # The same prompt again keeps the first prefill's cells and logits: nothing is evaluated, so there is no
    # prefill rate to show or plot (a zero would read as a stalled prefill).
    win = make_window(qtbot, as_started=True)
    fresh = PhaseMetrics(prompt_tokens=20, prefill_tokens=20, prefill_ms=50.0, decode_tokens=3, decode_ms=30.0)
    cached = PhaseMetrics(prompt_tokens=20, reused_tokens=20, decode_tokens=3, decode_ms=30.0)
    for m in (fresh, cached):
        win.dashboard.add_metrics(m)
    win.dashboard._show_message(cached)
    assert (win.dashboard.card_prefill.value.text(), win.dashboard.card_prefill.detail.text()) == \
        ("—", "nothing new to evaluate")
    win.dashboard._update_series()  # what the staged redraw runs a frame later
    xs, ys = win.dashboard.curve_prefill.getData()
    assert list(xs) == [1] and list(ys) == [fresh.prefill_tps]
    assert cached.prefill_short == "prompt cached" and fresh.prefill_short == "prefill 400 tok/s"
