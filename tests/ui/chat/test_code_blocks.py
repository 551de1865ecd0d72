"""Code blocks in replies (issue 32, code blocks): a streamed reply's fenced code is highlighted by Pygments
(several token colours, other ones in the dark theme), and each block's Copy link, clicked, puts exactly that
block's code on the clipboard, also for a reply rendered in streamed pieces."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QTextCursor

import chat_drive

pytestmark = pytest.mark.gui

PYTHON = 'def greet(name):\n    """Say hello."""\n    return f"Hello, {name}!"  # <b>not markup</b>'
SHELL = "ls -la | grep '\\.gguf$'"
REPLY = (f"Here is the function:\n\n```python\n{PYTHON}\n```\n\nAnd the listing, after a paragraph.\n\n"
         f"Another paragraph.\n\n```\n{SHELL}\n```\n\nDone.")


def anchors(body) -> dict[str, int]:
    """href -> document position of each link in the view."""
    found: dict[str, int] = {}
    block = body.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            href = frag.charFormat().anchorHref()
            if href:
                found.setdefault(href, frag.position())
            it += 1
        block = block.next()
    return found


def colours_of(body, text: str) -> set[str]:
    """Foreground colours of the characters of `text` in the view."""
    doc = body.document()
    start = doc.find(text).selectionStart()
    assert start >= 0, text
    seen = set()
    for pos in range(start, start + len(text)):
        cursor = QTextCursor(doc)
        cursor.setPosition(pos + 1)
        seen.add(cursor.charFormat().foreground().color().name())
    return seen


def click_link(qtbot, body, href: str) -> None:
    qtbot.waitUntil(body.isVisible)  # laid out in the chat
    cursor = QTextCursor(body.document())
    cursor.setPosition(anchors(body)[href] + 1)
    qtbot.mouseClick(body.viewport(), Qt.MouseButton.LeftButton, pos=body.cursorRect(cursor).center())


def stream_reply(window) -> object:
    rid = chat_drive.send(window, "write code")
    chat_drive.prefilled(window, rid)
    pieces = [REPLY[i:i + 7] for i in range(0, len(REPLY), 7)]
    chat_drive.tokens(window, rid, *pieces)
    widget = window.message_view.widget_for(window.session.streaming_message_id)
    assert widget is not None
    return rid, widget


def test_copy_puts_the_blocks_own_code_on_the_clipboard(window, qtbot) -> None:
    window.resize(1400, 900)
    rid, widget = stream_reply(window)  # rendered in pieces while it streams
    assert set(anchors(widget.body)) >= {"copy:0", "copy:1"}
    click_link(qtbot, widget.body, "copy:1")
    assert QGuiApplication.clipboard().text() == SHELL
    chat_drive.done(window, rid)
    widget = window.message_view.widget_for(widget.message.id)
    click_link(qtbot, widget.body, "copy:0")
    assert QGuiApplication.clipboard().text() == PYTHON  # the code as written, markup-looking text and all


def test_code_is_highlighted_in_the_themes_style(window, qtbot) -> None:
    rid, widget = stream_reply(window)
    chat_drive.done(window, rid)
    widget = window.message_view.widget_for(widget.message.id)
    window.menus.theme_actions["light"].trigger()
    light = colours_of(widget.body, "def greet(name):")
    assert len(light) >= 2  # the keyword and the name differ
    assert len(colours_of(widget.body, SHELL)) == 1  # no language named: not guessed
    window.menus.theme_actions["dark"].trigger()
    dark = colours_of(widget.body, "def greet(name):")
    assert len(dark) >= 2 and dark != light
    window.menus.theme_actions["system"].trigger()
