"""A chat opened while another chat's reply is being written says why its Send waits (QA, item E3): a note above
the message box names the chat whose reply it is and what Stop does there; it goes when the reply ends or its
chat is shown again."""

from __future__ import annotations

import pytest

from chat_drive import done, send, tokens

pytestmark = pytest.mark.gui

LONG = "Explain why decode is memory-bandwidth bound on a laptop, and what prefill is bound by instead, please"


def test_the_note_names_the_chat_whose_reply_holds_send(win) -> None:
    rid = send(win, "write a poem about roses")
    first = win.session.conversation.id
    title = win.store.conversation(first).title
    tokens(win, rid, "Roses")
    assert not win.busy_note.isVisibleTo(win)  # its own chat: Stop and Esc are about the reply on screen
    win.new_chat()
    assert not win.send_button.isEnabled() and win.stop_button.isEnabled()
    assert win.busy_note.isVisibleTo(win)
    assert win.busy_note.text() == f"A reply is being written in “{title}”: Send waits for it; Stop ends it."
    win.open_conversation(first)  # back where the reply is written
    assert not win.busy_note.isVisibleTo(win)
    win.new_chat()
    assert win.busy_note.isVisibleTo(win)
    done(win, rid)
    assert not win.busy_note.isVisibleTo(win) and win.send_button.isEnabled()


def test_a_long_title_is_cut_in_the_note_and_whole_on_hover(win) -> None:
    rid = send(win, LONG)
    title = win.store.conversation(win.session.conversation.id).title
    win.new_chat()
    note = win.busy_note.text()
    assert note.startswith("A reply is being written in “") and note.endswith("”: Send waits for it; Stop ends it.")
    assert "…" in note and len(note) < len(title) + 60
    assert title in win.busy_note.toolTip()
    done(win, rid)
