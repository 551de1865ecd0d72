"""The TTFT plot is about the chat on screen: a new (empty) chat shows it empty, on the same neutral range as
an empty chat before any reply, not on the prompt range of the chat shown before (found in QA under Xvfb: the
x axis kept the last chat's 0-3000 tokens). Fake engine."""

from __future__ import annotations

from typing import Any

import pytest

from chat_drive import done, send

pytestmark = pytest.mark.gui


def _x_range(win: Any) -> tuple[float, float]:
    low, high = win.dashboard.plot_ttft.getViewBox().viewRange()[0]
    return float(low), float(high)


def _points(win: Any) -> int:
    return len(win.dashboard.scatter_ttft.data)


def test_an_empty_chat_shows_an_empty_ttft_plot_on_a_neutral_range(win: Any, qtbot: Any) -> None:
    win.new_chat()
    qtbot.wait(50)  # a frame: pyqtgraph applies an automatic range when it paints
    empty = _x_range(win)
    assert _points(win) == 0 and empty[1] < 3000

    rid = send(win, "a long prompt")
    done(win, rid, prompt_tokens=3000)
    qtbot.waitUntil(lambda: _points(win) == 1)  # the plots come a frame after the reply's numbers
    qtbot.wait(50)
    low, high = _x_range(win)
    assert low <= 3000 <= high  # the reply's point is on the plot

    win.new_chat()
    qtbot.wait(50)
    assert _points(win) == 0
    assert _x_range(win) == empty, "the empty chat kept the previous chat's prompt range"
