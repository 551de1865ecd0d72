"""The KV card is the chat on screen's (its prompt and replies), the Memory box's bar the engine's cache as it
is now: another chat's longer reply, a full cache or a reload that emptied it never show on a short chat's
card, and the Memory box says plainly whose cache it shows."""

from __future__ import annotations

import pytest

from app.engine import protocol as P
from chat_drive import done, send, tokens

pytestmark = pytest.mark.gui


def _stats(win, used: int) -> None:  # type: ignore[no-untyped-def]
    win.engine._dispatch(P.Stats(rss_bytes=300 << 20, kv_cells_used=used, kv_cells_allocated=512,
                                 kv_bytes_used=used * 1024, kv_bytes_allocated=512 * 1024, loaded=True))


def _reply(win, prompt_tokens: int, reply_tokens: int) -> None:  # type: ignore[no-untyped-def]
    rid = send(win, "hello")
    tokens(win, rid, "a", "b")
    done(win, rid, tokens=reply_tokens, prompt_tokens=prompt_tokens)


def test_the_kv_card_is_the_shown_chats_not_the_engines(win) -> None:  # type: ignore[no-untyped-def]
    card, dash = win.dashboard.card_kv, win.dashboard
    win.new_chat()
    short = win.session.conversation.id
    _reply(win, prompt_tokens=40, reply_tokens=34)  # ends at 73 cells
    assert card.value.text() == "73 tok" and card.detail.text() == "439 tokens free · this chat"
    win.new_chat()
    _reply(win, prompt_tokens=100, reply_tokens=55)  # another chat fills the engine's cache to 154
    _stats(win, 154)
    win.open_conversation(short)
    _stats(win, 154)  # the next poll: the engine still holds the other chat
    assert card.value.text() == "73 tok" and card.detail.text() == "439 tokens free · this chat"
    assert dash.kv_bar.value() == 154 and dash.kv_label.text().startswith("The engine's cache now:")
    _stats(win, 511)  # a full engine cache is not this chat's
    assert card.value.text() == "73 tok" and "1 tokens free" not in card.detail.text()
    win.new_chat()
    assert card.value.text() == "0 tok" and card.detail.text() == "512 tokens free · this chat"


def test_a_reload_empties_the_engines_bar_at_once(win) -> None:  # type: ignore[no-untyped-def]
    from fake_engine import loaded_event

    card, dash = win.dashboard.card_kv, win.dashboard
    win.new_chat()
    _reply(win, prompt_tokens=40, reply_tokens=34)
    _stats(win, 154)
    win.engine._dispatch(loaded_event())  # reloaded: the engine's cache is empty, before any new stats
    assert dash.kv_bar.value() == 0 and "headroom 512 tokens" in dash.kv_label.text()
    assert card.value.text() == "73 tok"  # the chat still holds its 73 tokens (prefilled again at the next send)


def test_a_reload_mid_reply_leaves_the_chats_own_kv(win) -> None:  # type: ignore[no-untyped-def]
    # In the engine's order: the reply's cancelled Done, then the new model's Loaded. The card then says what the
    # chat holds (prompt 20 + 9 decode steps), the engine's bar and the status bar the emptied cache.
    from pathlib import Path

    from chat_drive import prefilled
    from fake_engine import loaded_event

    card, dash = win.dashboard.card_kv, win.dashboard
    win.new_chat()
    rid = send(win, "hello")
    prefilled(win, rid, prompt_tokens=20)
    tokens(win, rid, *["a"] * 10)
    win.load_model(Path("/models/fake-Q4_K_M.gguf"))
    done(win, rid, "cancelled", tokens=10, prompt_tokens=20)
    win.engine._dispatch(loaded_event())
    assert card.value.text() == "29 tok" and card.detail.text() == "483 tokens free · this chat"
    assert dash.kv_bar.value() == 0 and "KV" not in win.status_line.part("memory")
