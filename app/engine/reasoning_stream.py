"""Token events of one reply with the thinking kept apart from the answer (local engine and remote backend).

Wraps app.core.chat.reasoning's splitter with what the protocol and the metrics need: each piece of reply text
becomes one `Token` whose `text` is answer and whose `reasoning` is thinking; at the end the whole answer,
the whole reasoning, the number of generated tokens spent thinking, how long the thinking took, and the time
to the first answer token (what a user of a reasoning model waits for, beside the plain TTFT).
"""

from __future__ import annotations

from typing import Any

from app.core.chat.reasoning import ReasoningSplitter, ends_inside_thinking
from app.engine import protocol as P

PROMPT_TAIL_TOKENS = 8  # enough of the prompt's end to see a generation prompt that opens "<think>\n"


def prompt_opens_thinking(llm: Any, prompt_tokens: list[int]) -> bool:
    """True when the templated prompt ends inside an open `<think>` (DeepSeek-R1's generation prompt)."""
    if not prompt_tokens:
        return False
    tail = llm.detokenize(prompt_tokens[-PROMPT_TAIL_TOKENS:], special=True).decode("utf-8", "replace")
    return ends_inside_thinking(tail)


class ReasoningStream:
    """Turns reply text into Token events, splitting thinking from answer when `split` is on."""

    def __init__(self, request_id: str, t_request: float, split: bool = True,
                 starts_in_thinking: bool = False) -> None:
        self.request_id = request_id
        self.t_request = t_request
        self.splitter = ReasoningSplitter(starts_in_thinking) if split else None
        self.index = 0
        self._answer: list[str] = []
        self._reasoning: list[str] = []
        self.thinking_tokens = 0  # generated tokens up to and including the one that closed the thinking
        self.t_first: float | None = None  # first text of any kind
        self.t_first_answer: float | None = None
        self.t_thinking_end: float | None = None

    @property
    def answer(self) -> str:
        return "".join(self._answer)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning).rstrip()

    def emit(self, text: str, now: float, generated: int, reasoning: str = "") -> P.Token | None:
        """The Token event for the next piece of reply (`generated`: tokens so far), or None when it all
        stays held back (a tag cut in the middle)."""
        if self.t_first is None:
            self.t_first = now
        if self.splitter is None:
            return self._token(reasoning, text, now)
        was_thinking = self.splitter.thinking
        r = self.splitter.feed_reasoning(reasoning)
        r2, a = self.splitter.feed(text)
        r += r2
        if was_thinking or self.splitter.thinking or reasoning:
            self.thinking_tokens = generated
            self.t_thinking_end = now
        return self._token(r, a, now)

    def finish(self, now: float) -> P.Token | None:
        """The end of the reply: the held-back tail as a last Token (or None)."""
        if self.splitter is None:
            return None
        r, a = self.splitter.flush()
        return self._token(r, a, now)

    def _token(self, reasoning: str, answer: str, now: float) -> P.Token | None:
        if not reasoning and not answer:
            return None
        if answer and self.t_first_answer is None:
            self.t_first_answer = now
        self._answer.append(answer)
        self._reasoning.append(reasoning)
        token = P.Token(self.request_id, answer, self.index, now, reasoning=reasoning)
        self.index += 1
        return token

    def metrics(self) -> dict[str, Any]:
        """Keys added to Done.metrics: reasoning_tokens, reasoning_ms, ttft_answer_ms (None: no answer)."""
        thought = self.splitter is not None and self.splitter.saw_thinking
        reasoning_ms = 0.0
        if thought and self.t_first is not None and self.t_thinking_end is not None:
            reasoning_ms = (self.t_thinking_end - self.t_first) * 1000.0
        ttfa = None if self.t_first_answer is None else (self.t_first_answer - self.t_request) * 1000.0
        return {"reasoning_tokens": self.thinking_tokens if thought else 0, "reasoning_ms": reasoning_ms,
                "ttft_answer_ms": ttfa}
