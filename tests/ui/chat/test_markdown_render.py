"""A code block that never got its closing fence (the reply was stopped, cut at max tokens or broken by an
error inside it) stays a code block once the reply ends, as CommonMark has it: the fence runs to the end. Raw HTML
from the model is escaped, code rendered."""

from __future__ import annotations

import re

import pytest

from app.engine import protocol as P
from app.ui.chat.markdown_render import close_open_fence, markdown_to_html, plain_to_html
from chat_drive import send, tokens

pytestmark = pytest.mark.gui

CODE = ["Here", " it", " is", ":\n\n", "```", "python\n", "def", " f", "():\n", "    return", " 1\n", "print"]


def _shown_as_code(widget) -> bool:  # type: ignore[no-untyped-def]
    shown = widget.body.document().toPlainText()
    return "```" not in shown and "def f():\n    return 1" in shown and "monospace" in widget.body.toHtml()


@pytest.mark.parametrize("ending", ["stop", "error"])
def test_an_unclosed_fence_stays_a_code_block_after_the_reply_ends(win, ending: str) -> None:  # type: ignore[no-untyped-def]
    rid = send(win, "a function please")
    reply_id = win.session.streaming_message_id
    tokens(win, rid, *CODE)
    widget = win.message_view.widget_for(reply_id)
    assert _shown_as_code(widget)  # while it streams
    if ending == "stop":
        win.escape()  # Esc, as a user stops it; the engine answers with a cancelled Done
        win.engine._dispatch(P.Done(rid, "", "cancelled", {}))
    else:
        win.engine._dispatch(P.Error(rid, "decode", "llama_decode failed"))
    assert not win.session.busy
    widget = win.message_view.widget_for(reply_id)
    assert _shown_as_code(widget)
    win.open_conversation(win.session.conversation.id)  # reopened from the store: the same
    assert _shown_as_code(win.message_view.widget_for(reply_id))


def test_closing_follows_the_fence_that_opened() -> None:
    assert close_open_fence("```\nx\n```\n") == "```\nx\n```\n"  # closed: untouched
    assert close_open_fence("~~~\n```\nx") == "~~~\n```\nx\n~~~\n"  # a backtick line inside a tilde fence
    assert close_open_fence("````\n```\nx\n") == "````\n```\nx\n````\n"  # a shorter fence does not close it
    assert close_open_fence("say ```x``` here") == "say ```x``` here"  # inline code, not a fence
    assert close_open_fence("```a`b\nx") == "```a`b\nx"  # a backtick info string: not a fence
    assert "<pre>" in markdown_to_html("```") and "<p>" not in markdown_to_html("```\n")


def test_markdown_escapes_html_and_renders_code():
    out = markdown_to_html("Hi <script>alert(1)</script> **bold**\n\n```python\nx = 1 < 2\n```\n")
    assert "<script>" not in out and "&lt;script&gt;" in out
    code_text = re.sub(r"<[^>]+>", "", out.split("<pre><code>", 1)[1])  # its highlighting spans apart
    assert "<strong>bold</strong>" in out and "<pre><code" in out and "x = 1 &lt; 2" in code_text
    assert plain_to_html("a <b>\n**c**") == "<p>a &lt;b&gt;<br>**c**</p>"
