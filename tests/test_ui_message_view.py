"""Messages wrap to the view's width, whatever the length of their metrics line (narrow windows)."""

from __future__ import annotations

import time

from app.core.chat_store import Message
from app.core.metrics import PhaseMetrics
from app.ui.message_view import MessageView


def test_a_long_metrics_line_never_widens_a_message_past_the_view(qtbot) -> None:
    view = MessageView()
    qtbot.addWidget(view)
    view.resize(420, 500)
    view.show()
    metrics = PhaseMetrics(ttft_ms=123456.0, prefill_tokens=9999, prefill_ms=1.0, decode_tokens=9999,
                           decode_ms=1.0).to_dict()
    now = time.time()
    words = "the sea is wide and deep and the river runs to it " * 12
    widget = view.add_message(Message(1, 1, "assistant", words, "complete", metrics, None, "stop", None, now, now))
    qtbot.waitUntil(lambda: widget.isVisible())
    qtbot.wait(50)
    viewport = view.viewport().width()
    assert widget.width() <= viewport
    assert widget.body.width() <= viewport  # so the body wraps instead of being cut off
    assert "TTFT" in widget.metrics_label.text() and "decode" in widget.metrics_label.toolTip()
