"""The dashboard's cards never cut their words (issue 32, item 11): a reply with the longest lines a card gets
(a saved cache restored, prompt-lookup drafting, thinking, a prompt cut to fit) played through the fake engine,
then the window at 1600×1000 and 800×600: every line of every card, as drawn, fits its card, and together the
drawn lines hold every word of the text. The server-traffic cards too."""

from __future__ import annotations

import pytest

import chat_drive
from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from fake_window import settle

pytestmark = pytest.mark.gui


def drawn_lines(label) -> list[str]:
    return label.lines() if hasattr(label, "lines") else [label.text()]


def words(text: str) -> list[str]:
    return [w for w in text.split() if w != "·"]


def cut_words(cards) -> list[str]:
    """What a card loses: a drawn line wider than its label, or a word of the text on none of its lines."""
    lost = []
    for card in cards:
        for label in (card.title, card.value, card.detail):
            width = label.contentsRect().width()
            lines = drawn_lines(label)
            for line in lines:
                if label.fontMetrics().horizontalAdvance(line) > width:
                    lost.append(f"{card.title.text()}: {line!r} wider than {width}")
            if words(" ".join(lines)) != words(label.text()):
                lost.append(f"{card.title.text()}: words lost from {label.text()!r}")
    return lost


def long_reply(win) -> None:
    rid = chat_drive.send(win, "tell me")
    chat_drive.prefilled(win, rid, prompt_tokens=3285, prefill_tokens=3126)
    chat_drive.tokens(win, rid, *["word "] * 12)
    m = PhaseMetrics(prompt_tokens=3285, prefill_tokens=3126, prefill_ms=14560.0, ttft_ms=14580.0,
                     decode_tokens=311, decode_ms=15550.0, generated_tokens=312, itl_ms=[50.0] * 311,
                     total_ms=30130.0, reused_tokens=159, kv_restored_tokens=159, kv_restore_ms=8.0,
                     kv_restore_prefill_ms=1456.0, draft_tokens=400, draft_accepted=300, drafter="prompt lookup")
    metrics = m.to_dict() | {"reasoning_tokens": 320, "ttft_answer_ms": 1456.0, "context_prompt_dropped": 1234}
    win.engine._dispatch(P.Done(rid, "", "stop", metrics))


@pytest.mark.parametrize("size", [(1600, 1000), (800, 600)])
def test_no_card_cuts_its_words(window, qtbot, size: tuple[int, int]) -> None:
    long_reply(window)
    window.resize(*size)
    settle(qtbot)
    cards = window.dashboard.cards
    details = " ".join(card.detail.text() for card in cards)
    for words in ("restored 159 tokens in 8 ms", "lookup 75 % accepted", "first answer 1456 ms · 320 thinking tok",
                  "prompt cut: 1234 tok dropped"):
        assert words in details
    assert not cut_words(cards)


def test_the_server_traffic_cards_keep_their_titles(window, qtbot) -> None:
    from app.core.metrics.serve_traffic import Traffic

    panel = window.dashboard.server_traffic
    panel.set_url("http://127.0.0.1:8080")
    panel.on_traffic(Traffic(t=1.0, processing=4, deferred=8, decode_tps=123.4,
                             tokens_total=1234567, ttft_ms=1456.0, finished=33, kv_tokens=123456, kv_ratio=0.42))
    window.resize(800, 600)
    settle(qtbot)
    assert not cut_words(panel.cards)


NOT_USED = ("saved KV of this chat not used: it was made with context size 4096, the model is loaded with 2048; "
            "prefilled instead")


def row_misaligned(cards) -> list[str]:
    """Cards side by side whose titles or numbers are not on one line (a taller card beside them stretched them)."""
    grid = cards[0].parentWidget()
    rows: dict[int, list] = {}
    for card in cards:
        rows.setdefault(card.geometry().top(), []).append(card)
    wrong = []
    for row in rows.values():
        for part in ("title", "value"):
            tops = {getattr(card, part).mapTo(grid, getattr(card, part).rect().topLeft()).y() for card in row}
            if len(tops) > 1:
                wrong.append(f"{part}s of {[c.title.text() for c in row]} at {sorted(tops)}")
    return wrong


@pytest.mark.parametrize("size", [(1600, 1000), (800, 600)])
def test_a_saved_kv_not_used_keeps_its_reason_and_the_row_its_line(window, qtbot, size: tuple[int, int]) -> None:
    window.resize(*size)
    settle(qtbot)
    prompt = window.dashboard.card_prompt
    for during in (True, False):  # at the first token, then at the end
        if during:
            rid = chat_drive.send(window, "live")
            window.engine._dispatch(P.Prefilled(rid, 249, 249, 900.0, 910.0, 249, 0, 0.0, restore_note=NOT_USED))
        else:
            window.engine._dispatch(P.Done(chat_drive.request_of(window), "", "stop", PhaseMetrics(
                prompt_tokens=249, prefill_tokens=249, prefill_ms=900.0, decode_tokens=4, decode_ms=200.0,
                generated_tokens=5, itl_ms=[50.0] * 4, kv_restore_note=NOT_USED).to_dict()))
        settle(qtbot)
        assert prompt.detail.text().startswith("249 new · 0 reused · saved KV not used")
        assert NOT_USED in prompt.detail.toolTip()  # the whole reason on hover
        assert not cut_words(window.dashboard.cards)
        assert not row_misaligned(window.dashboard.cards)
