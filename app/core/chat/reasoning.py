"""Reasoning ("thinking") apart from the answer, on a stream of text pieces.

Reasoning models (DeepSeek-R1 distills, Qwen3, QwQ ...) write their thinking between `<think>` and
`</think>` before the answer. The tags reach us cut anywhere: a tokenizer may spell `</think>` as one special
token or as `</`, `think`, `>`, and a burst of text may end in the middle of a tag. `ReasoningSplitter` takes
pieces as they come and returns, for each, the part that is reasoning and the part that is answer, holding
back only the few characters that could still be the start of a tag.

Two more shapes of the same thing:
- a chat template whose generation prompt already opens the thinking (DeepSeek-R1's ends with
  "<think>\\n"): the reply starts inside it and only `</think>` appears (`starts_in_thinking=True`;
  `ends_inside_thinking(prompt)` tells from the rendered prompt);
- a server that splits it for us and streams `reasoning_content` deltas beside `content`
  (`feed_reasoning`).

An opening tag counts only at the very start of the reply (after white space): an answer that merely
mentions "<think>" later stays answer. Pure Python, no I/O.
"""

from __future__ import annotations

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"

_START, _THINKING, _ANSWER = "start", "thinking", "answer"


def ends_inside_thinking(prompt: str, open_tag: str = OPEN_TAG, close_tag: str = CLOSE_TAG) -> bool:
    """True when a rendered prompt leaves the model inside an open thinking block (its reply starts there).

    Qwen3's template with thinking switched off ends with "<think>\\n\\n</think>\\n\\n": closed, so False."""
    tail = prompt.rstrip()
    return tail.endswith(open_tag)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a proper start of `tag` (0: none)."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class ReasoningSplitter:
    """Streaming `<think>…</think>` splitter: `feed(piece)` returns (reasoning, answer) for that piece.

    Joining every returned part (after `flush()`) gives all of the reasoning and all of the answer; the tags
    themselves and the white space right after each opening (the "\\n" after `<think>`, the "\\n\\n" after
    `</think>`) are left out. The split never looks back: a character, once returned, stays where it went."""

    def __init__(self, starts_in_thinking: bool = False, open_tag: str = OPEN_TAG,
                 close_tag: str = CLOSE_TAG) -> None:
        self.open_tag = open_tag
        self.close_tag = close_tag
        self.state = _THINKING if starts_in_thinking else _START
        self.saw_thinking = starts_in_thinking  # a thinking block was opened (by the reply or the prompt)
        self._pending = ""  # held back: white space before the first word, or a possible partial tag
        self._reasoning_begun = False
        self._answer_begun = False
        self._strip_answer_lead = False  # after `</think>` the answer's leading blank lines are dropped

    @property
    def thinking(self) -> bool:
        """True while inside a thinking block."""
        return self.state == _THINKING

    def _reasoning(self, text: str) -> str:
        if not self._reasoning_begun:
            text = text.lstrip()
            self._reasoning_begun = bool(text)
        return text

    def _answer(self, text: str) -> str:
        if not self._answer_begun:
            if self._strip_answer_lead:
                text = text.lstrip()
            self._answer_begun = bool(text)
        return text

    def feed_reasoning(self, text: str) -> str:
        """Reasoning that arrived already separated (a server's `reasoning_content`); returns what to show."""
        if text:
            self.saw_thinking = True
        return self._reasoning(text)

    def feed(self, text: str) -> tuple[str, str]:
        """One more piece of the reply; returns (reasoning, answer) that can be shown now."""
        buf = self._pending + text
        self._pending = ""
        reasoning: list[str] = []
        answer: list[str] = []
        while buf:
            if self.state == _START:
                word = buf.lstrip()
                if not word:  # white space only so far: it may precede `<think>`
                    self._pending = buf
                    break
                if word.startswith(self.open_tag):
                    self.state, self.saw_thinking = _THINKING, True
                    buf = word[len(self.open_tag):]
                    continue
                if self.open_tag.startswith(word):  # a tag cut short: wait for the rest
                    self._pending = buf
                    break
                self.state = _ANSWER
                continue
            if self.state == _THINKING:
                end = buf.find(self.close_tag)
                if end >= 0:
                    reasoning.append(self._reasoning(buf[:end]))
                    buf = buf[end + len(self.close_tag):]
                    self.state = _ANSWER
                    self._strip_answer_lead = True
                    continue
                keep = _partial_suffix(buf, self.close_tag)
                reasoning.append(self._reasoning(buf[:len(buf) - keep]))
                self._pending = buf[len(buf) - keep:]
                break
            answer.append(self._answer(buf))
            break
        return "".join(reasoning), "".join(answer)

    def flush(self) -> tuple[str, str]:
        """The end of the reply: whatever was held back goes where it belongs (a cut tag is plain text)."""
        rest, self._pending = self._pending, ""
        if not rest:
            return "", ""
        if self.state == _THINKING:
            return self._reasoning(rest), ""
        return "", self._answer(rest)


def split_reasoning(text: str, starts_in_thinking: bool = False) -> tuple[str, str]:
    """A whole reply at once: (reasoning, answer)."""
    splitter = ReasoningSplitter(starts_in_thinking)
    r1, a1 = splitter.feed(text)
    r2, a2 = splitter.flush()
    return r1 + r2, a1 + a2
