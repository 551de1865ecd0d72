"""The context meter at the input (issue 32, context meter): before anything is sent it shows the chat and
the message being typed against the model's context, grows as the user types, counts the chat's tokens from
its last reply's metrics once there is one, and warns when the message will not fit."""

from __future__ import annotations

import re

import pytest
from PySide6.QtWidgets import QApplication

import chat_drive
from app.ui.toolkit import theme

pytestmark = pytest.mark.gui


def shown_tokens(window, qtbot) -> int:
    qtbot.wait(200)  # the meter follows typing after a short pause
    QApplication.processEvents()
    label = window.context_label
    assert label.isVisible()
    found = re.search(r"context ≈ ([\d,]+) of 512 tokens", label.text())  # the fake engine's 512 context
    assert found, label.text()
    return int(found.group(1).replace(",", ""))


def test_the_meter_follows_the_draft_and_the_chat(window, qtbot) -> None:
    window.new_chat()
    assert shown_tokens(window, qtbot) == 0
    qtbot.keyClicks(window.input, "word " * 40)  # 200 characters: about 50 tokens
    typed = shown_tokens(window, qtbot)
    assert 30 <= typed <= 70
    rid = chat_drive.send(window, "x" * 100)
    chat_drive.prefilled(window, rid)
    chat_drive.tokens(window, rid, "Hi", " there")
    chat_drive.done(window, rid, prompt_tokens=120, tokens=30)  # the engine held 120 + 30 for this chat
    assert shown_tokens(window, qtbot) == 150  # measured: nothing typed yet
    assert "measured" in window.context_label.toolTip()
    qtbot.keyClicks(window.input, "y" * 40)
    more = shown_tokens(window, qtbot)
    assert more > 150


def test_a_message_over_the_context_is_said_before_sending(window, qtbot) -> None:
    window.new_chat()
    window.input.setPlainText("long words " * 300)  # ~3300 characters: ~825 tokens for a 512 context
    assert shown_tokens(window, qtbot) > 512
    assert "will not fit" in window.context_label.text()
    assert theme.WARN.lower() in window.context_label.styleSheet().lower()
    assert not window.session.busy  # nothing was sent


def test_the_meter_is_whole_in_an_800_by_600_window(window, qtbot) -> None:
    window.resize(800, 600)
    window.new_chat()
    window.input.setPlainText("long words " * 300)  # the longest line: "… tokens · 100 % · will not fit"
    shown_tokens(window, qtbot)
    label = window.context_label
    # not squeezed beside the buttons: the chat column's width, and tall enough for its wrapped lines
    assert label.width() >= window.input.width() * 0.9
    assert label.height() >= label.heightForWidth(label.width()) and "will not fit" in label.text()


def test_the_meter_follows_the_reply_as_it_is_written(window, qtbot) -> None:
    from fake_engine import loaded_event

    window.engine._dispatch(loaded_event())  # loaded with the window open: the dashboard counts the live KV
    window.new_chat()
    chat = window.session.conversation.id
    rid = chat_drive.send(window, "hi")
    chat_drive.done(window, rid, prompt_tokens=40, tokens=34)
    assert shown_tokens(window, qtbot) == 74
    rid = chat_drive.send(window, "more")
    chat_drive.prefilled(window, rid, prompt_tokens=80)
    chat_drive.tokens(window, rid, *["a"] * 100)
    assert shown_tokens(window, qtbot) == 179  # the prompt and 99 decode steps so far, not the 74 before
    assert "as its reply is written" in window.context_label.toolTip()
    window.new_chat()  # another chat's meter is its own, the reply going on or not
    chat_drive.tokens(window, rid, *["b"] * 10)
    assert shown_tokens(window, qtbot) == 0
    window.open_conversation(chat)  # back: the tokens written meanwhile count
    assert shown_tokens(window, qtbot) == 189
    chat_drive.done(window, rid, prompt_tokens=80, tokens=110)
    assert shown_tokens(window, qtbot) == 190 and "at its last reply" in window.context_label.toolTip()
