"""The status bar's right-hand line reads as one line with a separator wherever two parts meet, whichever parts
are shown: serving + memory read "…/v1 · 3 in flight (1 waiting) · engine RSS …" (found in QA under Xvfb as
"…/v1 · 0 in flight engine RSS …"), and so on for every combination of the server, the reply's speed and the
memory. The window runs on the fake engine and a stand-in server (tests/helpers/fake_serve.py)."""

from __future__ import annotations

import dataclasses
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QLabel

from app.engine import protocol as P
from app.ui.toolkit.whole_parts_label import dropping_parts
from app.ui.window.status_line import PARTS, SEPARATOR, StatusLine, join_parts
from chat_drive import done, send
from fake_engine import loaded_event
from fake_window import make_window

pytestmark = pytest.mark.gui

FAKE_SERVE = [sys.executable, str(Path(__file__).resolve().parents[2] / "helpers" / "fake_serve.py")]
STATS = P.Stats(rss_bytes=300 << 20, kv_cells_used=23, kv_cells_allocated=512, kv_bytes_used=0,
                kv_bytes_allocated=0, loaded=True)


def status_bar_as_read(win: Any) -> str:
    """The status bar's labels as a user reads them: the shown ones, left to right, side by side."""
    labels = [w for w in win.statusBar().findChildren(QLabel) if w.isVisible() and w.text()]
    labels.sort(key=lambda w: w.mapTo(win, w.rect().topLeft()).x())
    return " ".join(w.text() for w in labels)


def _settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def test_serving_and_the_memory_have_a_separator_between_them(qtbot: Any) -> None:
    win = make_window(qtbot)
    win.resize(1600, 1000)  # room for the whole line (a narrower window drops its last parts)
    win.show()
    win.engine._dispatch(loaded_event())
    control = win.serve_switch.control
    control._command = FAKE_SERVE
    control.port = 0  # a free port: tests never take 8080
    win.session.model_path = "/models/fake-Q4_K_M.gguf"
    win.engine._dispatch(STATS)
    win.serve_switch.action.trigger()
    qtbot.waitUntil(lambda: control.state == "serving", timeout=20000)
    _settle()
    read = status_bar_as_read(win)  # "0 in flight" until the server's first /metrics poll
    assert re.search(re.escape(control.url) + r" · \d in flight( \(1 waiting\))? · engine RSS 300\.0 MiB · KV 23/512 "
                     r"cells$", read), read
    qtbot.waitUntil(lambda: "3 in flight" in win.status_line.part("serve"), timeout=10000)
    _settle()
    assert "3 in flight (1 waiting) · engine RSS 300.0 MiB" in status_bar_as_read(win)
    win.dock.hide()  # the reply's speed joins the line, between the server and the memory
    rid = send(win, "hello")
    done(win, rid)
    _settle()
    read = status_bar_as_read(win)
    assert "(1 waiting) · TTFT 12 ms · decode 20.0 tok/s · engine RSS 300.0 MiB" in read, read
    win.resize(800, 600)  # too narrow for all of it: whole parts go from the end, never a cut number
    qtbot.wait(50)
    line = win.status_line
    assert line.text() in dropping_parts(line.full_text()) and line.text() != line.full_text()
    assert line.fontMetrics().horizontalAdvance(line.text()) <= line.contentsRect().width()
    assert line.full_text() in line.toolTip()  # the whole line on hover
    win.resize(1600, 1000)
    win.serve_switch.action.trigger()  # off: the line closes up
    qtbot.wait(50)
    assert "TTFT 12 ms · decode 20.0 tok/s · engine RSS" in status_bar_as_read(win)
    assert "serving" not in status_bar_as_read(win)
    win.close()


def test_a_remote_server_and_the_speed_have_a_separator_between_them(qtbot: Any) -> None:
    win = make_window(qtbot)
    win.resize(1600, 1000)
    win.show()
    remote = dataclasses.replace(loaded_event(model_desc="gpt (remote)"), model_path="http://127.0.0.1:9/v1",
                                 chat_template_source="server", chat_template_name="server")
    win.engine._dispatch(remote)
    win.dock.hide()
    rid = send(win, "hello")
    done(win, rid)
    _settle()
    assert "TTFT 12 ms · decode 20.0 tok/s · memory: on the server" in status_bar_as_read(win)
    win.close()


@pytest.mark.parametrize("shown", list(itertools.product([False, True], repeat=len(PARTS))))
def test_every_combination_of_parts_reads_as_one_line(qtbot: Any, shown: tuple[bool, ...]) -> None:
    line = StatusLine()
    qtbot.addWidget(line)
    line.resize(2000, 30)  # room for every part
    texts = {"serve": "serving http://127.0.0.1:8080/v1 · 0 in flight", "speed": "TTFT 52 ms · decode 61.5 tok/s",
             "memory": "engine RSS 312.0 MiB · KV 23/512 cells"}
    for name in PARTS:
        line.set_part(name, "  ")  # blank: says nothing, as empty
    for name, on in zip(PARTS, shown, strict=True):
        if on:
            line.set_part(name, texts[name])
    expected = [texts[name] for name, on in zip(PARTS, shown, strict=True) if on]
    assert line.text() == SEPARATOR.join(expected) == join_parts(line.part(n) for n in PARTS)
    assert not line.text().startswith(SEPARATOR.strip()) and not line.text().endswith(SEPARATOR.strip())
    assert (SEPARATOR * 2) not in line.text() and "  " not in line.text()
    assert line.isHidden() is not any(shown)
