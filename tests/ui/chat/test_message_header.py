"""A reply's header in a narrow chat: the metrics line moves under the name instead of being squeezed against
the Copy button, and comes back beside it in a wide chat."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication, QWidget

from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics

pytestmark = pytest.mark.gui


def rect_in(widget: QWidget, ancestor: QWidget) -> QRect:
    return QRect(widget.mapTo(ancestor, QPoint(0, 0)), widget.size())


@pytest.fixture
def view(qtbot):
    from app.ui.chat.message_view import MessageView

    view = MessageView()
    qtbot.addWidget(view)
    metrics = PhaseMetrics(prefill_tokens=1200, prefill_ms=2500.0, ttft_ms=2530.0, decode_tokens=99,
                           decode_ms=1600.0)
    view.add_message(Message(1, 1, "user", "Tell me a story", "complete", None, None, None, None, 0.0, 0.0))
    view.add_message(Message(2, 1, "assistant", "Once upon a time " * 10, "interrupted", metrics.to_dict(), None,
                             "cancelled", None, 0.0, 0.0))
    view.show()
    return view


def settle(qtbot) -> None:
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(20)


@pytest.mark.parametrize("width", [260, 300, 360])
def test_narrow_chat_shows_the_whole_metrics_line_clear_of_copy(view, qtbot, width: int) -> None:
    view.resize(width, 400)
    settle(qtbot)
    reply = view.widget_for(2)
    assert reply is not None
    metrics, copy = reply.metrics_label, reply.copy_button
    assert metrics.text()
    if metrics.wordWrap():  # on a row of its own, wrapped at its spaces: tall enough for all its lines
        assert metrics.heightForWidth(metrics.width()) <= metrics.height(), "the metrics line is cut"
    else:
        assert metrics.sizeHint().width() <= metrics.width(), "the metrics line is cut"
    assert not rect_in(metrics, reply).intersects(rect_in(copy, reply))
    assert reply.rect().contains(rect_in(copy, reply)), "Copy is outside the message"
    # the name and the state stay together at the left, not spread over the room the metrics left
    role, state = reply.role_label, reply.state_label
    assert role.width() <= role.sizeHint().width() + 2 and state.width() <= state.sizeHint().width() + 2


def test_wide_chat_keeps_the_metrics_beside_the_name(view, qtbot) -> None:
    view.resize(300, 400)
    settle(qtbot)
    view.resize(900, 400)
    settle(qtbot)
    reply = view.widget_for(2)
    assert reply is not None
    assert rect_in(reply.metrics_label, reply).top() == rect_in(reply.role_label, reply).top()
    assert reply.metrics_label.sizeHint().width() <= reply.metrics_label.width()
