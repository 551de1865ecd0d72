"""The chat's colours follow View ▸ Theme: the replies already on screen take the new theme's colours (their
header's TTFT and state were once left in the old theme's, grey on dark grey, and their code blocks' language
in one grey for both), and a window started in a saved dark theme draws the parts built before it read the theme
in the dark theme's colours too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QColor, QTextDocument
from PySide6.QtWidgets import QApplication

from app.core.chat.store import ChatStore
from app.core.config.settings import Settings
from chat_drive import done, open_window, prefilled, send, tokens
from contrast import TEXT_CONTRAST, background_behind, contrast_ratio, text_color
from fake_window import make_window

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("system_theme_after")]


def color_of_words(doc: QTextDocument, words: str) -> QColor:
    """The colour Qt draws `words` in."""
    found = doc.find(words)
    assert not found.isNull(), f"{words!r} is not in {doc.toPlainText()!r}"
    return found.charFormat().foreground().color()


def label_document(rich_text: str) -> QTextDocument:
    doc = QTextDocument()
    doc.setHtml(rich_text)
    return doc


def reply_with_metrics(win: Any, text: str, reason: str) -> Any:
    """A reply with a code block, written by the fake engine and ended for `reason`; its widget."""
    rid = send(win, text)
    prefilled(win, rid)
    tokens(win, rid, "Once", " upon", " a", " time:\n\n", "```python\n", "x = 1\n", "```\n")
    done(win, rid, reason)
    reply = win.store.messages(win.session.conversation.id)[-1]
    widget = win.message_view.widget_for(reply.id)
    assert widget is not None and "TTFT" in widget.metrics_label.text()
    return widget


def assert_readable(replies: list[Any]) -> None:
    """The quiet parts of each reply (its header's TTFT and state, its code block's language) are readable."""
    for reply in replies:
        language = color_of_words(reply.body.document(), "python")
        background = background_behind(reply.body, reply)
        assert contrast_ratio(language, background) >= TEXT_CONTRAST, (
            f"a code block's language {language.name()} on {background.name()}")
        background = background_behind(reply.metrics_label, reply)
        ttft = color_of_words(label_document(reply.metrics_label.text()), "TTFT")
        assert contrast_ratio(ttft, background) >= TEXT_CONTRAST, (
            f"TTFT {ttft.name()} on {background.name()}: {contrast_ratio(ttft, background):.2f}")
        if reply.state_label.text():
            state = text_color(reply.state_label)
            background = background_behind(reply.state_label, reply)
            assert contrast_ratio(state, background) >= TEXT_CONTRAST, (
                f"{reply.state_label.text()!r} {state.name()} on {background.name()}")


@pytest.mark.parametrize("first, second", [("light", "dark"), ("dark", "light")])
def test_reply_headers_stay_readable_after_a_theme_switch(qtbot, tmp_path: Path, first: str, second: str) -> None:
    store = ChatStore(tmp_path / "chats.sqlite3")
    win = open_window(qtbot, store)
    try:
        win.menus.theme_actions[first].trigger()  # View ▸ Theme
        replies = [reply_with_metrics(win, "Tell me a story", "stop"),
                   reply_with_metrics(win, "Another one", "cancelled")]
        assert replies[1].state_label.text() == "stopped"  # drawn in the warning colour
        assert_readable(replies)
        win.menus.theme_actions[second].trigger()
        assert_readable(replies)
    finally:
        win.close()
        store.close()


def test_a_saved_dark_theme_colours_what_was_built_before_it_was_read(qtbot, tmp_path: Path) -> None:
    settings = Settings()
    settings.window.theme = "dark"
    store = ChatStore(tmp_path / "chats.sqlite3")
    win = make_window(qtbot, store=store, settings=settings)
    try:
        win.show()
        qtbot.waitExposed(win)
        QApplication.processEvents()  # the dark palette reaches the widgets in posted events
        placeholder = win.message_view._placeholder  # "Type a message below…", an empty chat's only text
        assert placeholder.isVisible()
        color, background = text_color(placeholder), background_behind(placeholder, win.message_view)
        assert contrast_ratio(color, background) >= TEXT_CONTRAST, f"{color.name()} on {background.name()}"
    finally:
        win.close()
        store.close()
