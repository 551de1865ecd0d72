"""Thinking apart from the answer: the streaming splitter on every way a reply can be cut into pieces,
a prompt that opens the thinking itself, server-side `reasoning_content`, and the Token/Done stream."""

from __future__ import annotations

import itertools

import pytest

from app.core.chat.reasoning import ReasoningSplitter, ends_inside_thinking, split_reasoning
from app.engine import protocol as P
from app.engine.reasoning_stream import ReasoningStream

REPLY = "<think>\nThe user says hi. I should greet back.\n</think>\n\nHello! How can I help?"


def feed_pieces(pieces: list[str], starts_in_thinking: bool = False) -> tuple[str, str]:
    splitter = ReasoningSplitter(starts_in_thinking)
    reasoning, answer = [], []
    for piece in pieces:
        r, a = splitter.feed(piece)
        reasoning.append(r)
        answer.append(a)
    r, a = splitter.flush()
    return "".join(reasoning) + r, "".join(answer) + a


def test_whole_reply_is_split_without_tags_or_leading_blank_lines() -> None:
    reasoning, answer = split_reasoning(REPLY)
    assert reasoning.strip() == "The user says hi. I should greet back."
    assert not reasoning.startswith("\n")
    assert answer == "Hello! How can I help?"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_every_cut_into_fixed_pieces_gives_the_same_split(size: int) -> None:
    pieces = [REPLY[i:i + size] for i in range(0, len(REPLY), size)]
    assert feed_pieces(pieces) == split_reasoning(REPLY)


def test_every_single_and_double_cut_gives_the_same_split() -> None:
    # a tag may be cut at any character: `</`, `think`, `>` as three tokens, or a burst ending mid-tag
    whole = split_reasoning(REPLY)
    n = len(REPLY)
    for i, j in itertools.combinations(range(1, n), 2):
        assert feed_pieces([REPLY[:i], REPLY[i:j], REPLY[j:]]) == whole, (i, j)


def test_nothing_shown_is_ever_a_piece_of_a_tag() -> None:
    splitter = ReasoningSplitter()
    shown = []
    for ch in REPLY:
        r, a = splitter.feed(ch)
        shown.append(r + a)
    assert all("<" not in s and ">" not in s for s in shown)


def test_a_prompt_that_opens_thinking_starts_the_reply_inside_it() -> None:
    prompt = "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>\n"
    assert ends_inside_thinking(prompt)
    assert not ends_inside_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # Qwen3, thinking off
    assert not ends_inside_thinking("<start_of_turn>model\n")
    reply = "Okay, a greeting.\n</think>\n\nHi there."
    assert split_reasoning(reply, starts_in_thinking=True) == ("Okay, a greeting.\n", "Hi there.")
    # without knowing, the same reply would be all answer: the flag matters
    assert split_reasoning(reply) == ("", reply)


def test_a_reply_without_thinking_is_all_answer_and_kept_as_is() -> None:
    for reply in ("Hello.", "  indented code", "<b>bold</b>", "<th", "\n\n"):
        assert feed_pieces(list(reply)) == ("", reply), reply
    # a tag mentioned later in an answer is not thinking
    assert split_reasoning("Use <think> tags.") == ("", "Use <think> tags.")


def test_a_reply_cut_off_while_thinking_is_all_reasoning() -> None:
    assert feed_pieces(["<think>", "still going </thi"]) == ("still going </thi", "")


def test_server_side_reasoning_content_goes_to_reasoning() -> None:
    splitter = ReasoningSplitter()
    assert splitter.feed_reasoning("\nWeighing it.") == "Weighing it."
    assert splitter.feed("Answer.") == ("", "Answer.")
    assert splitter.saw_thinking


def test_reasoning_stream_events_metrics_and_totals() -> None:
    stream = ReasoningStream("r1", t_request=100.0, split=True)
    pieces = ["<think>", "\nPlan", " it.", "</th", "ink>", "\n\n", "Done", "."]
    events = [stream.emit(p, 100.0 + 0.1 * (i + 1), i + 1) for i, p in enumerate(pieces)]
    last = stream.finish(101.0)
    tokens = [e for e in [*events, last] if e is not None]
    assert all(isinstance(t, P.Token) for t in tokens)
    assert [t.index for t in tokens] == list(range(len(tokens)))
    assert "".join(t.reasoning for t in tokens) == "Plan it."
    assert "".join(t.text for t in tokens) == "Done."
    assert (stream.reasoning, stream.answer) == ("Plan it.", "Done.")
    m = stream.metrics()
    assert m["reasoning_tokens"] == 5  # "<think>" … "ink>": the closing tag's token is still thinking
    assert m["ttft_answer_ms"] == pytest.approx(700.0)  # "Done" was the 7th piece, at t = 100.7
    assert m["reasoning_ms"] == pytest.approx(400.0)  # first piece (100.1) to the closing tag (100.5)


def test_reasoning_stream_without_split_passes_text_through() -> None:
    stream = ReasoningStream("r2", t_request=0.0, split=False)
    event = stream.emit("<think>x</think>y", 1.0, 1)
    assert event is not None and event.text == "<think>x</think>y" and event.reasoning == ""
    assert stream.metrics() == {"reasoning_tokens": 0, "reasoning_ms": 0.0, "ttft_answer_ms": 1000.0}


def test_protocol_round_trips_the_reasoning_fields() -> None:
    done = P.decode(P.encode(P.Done("r", "answer", "stop", {}, reasoning="thought")))
    assert (done.text, done.reasoning) == ("answer", "thought")
    token = P.decode(P.encode(P.Token("r", "", 0, 1.0, reasoning="t")))
    assert token.reasoning == "t"
    assert P.decode('{"type":"token","request_id":"r","text":"a","index":0,"t":1.0}').reasoning == ""
