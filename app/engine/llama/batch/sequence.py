"""One request inside the batch: its prompt, how much of it is in the KV cache, its sampler, its text.

No llama_cpp here: the engine feeds it sampled tokens with their text pieces and it decides what to stream,
when to stop (EOS, a stop string, max_tokens) and what the request's timings were.
"""

from __future__ import annotations

import codecs
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from app.core.sampling.chain import Sampler
from app.core.sampling.constraint import grammar_timings


def find_stop(text: str, stops: list[str]) -> int | None:
    """Index of the earliest stop string in `text`, or None."""
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None


@dataclass
class Sequence:
    request_id: str
    prompt: list[int]
    sampler: Sampler
    max_tokens: int  # already clipped to the slot's room
    requested_max_tokens: int
    stop: list[str]
    ignore_eos: bool
    t_submit: float
    salt: str = ""  # its cache_salt: its cells are reused only by requests with the same one
    special_text: bool = False  # special tokens' text is part of the reply (tool-call markers)
    slot: int = -1
    n_cached: int = 0  # prompt tokens found in the KV cache at admission (not evaluated again)
    n_prefilled: int = 0  # prompt tokens in the KV cache so far (cached ones included)
    pending: int | None = None  # the last sampled token: fed to the next step
    prefill_steps: int = 0  # decode steps that carried a chunk of this prompt
    generated: int = 0
    emitted: int = 0  # tokens streamed (one chunk each, even when its text is empty or held back)
    finish: str | None = None
    t_admit: float = 0.0
    t_first: float = 0.0
    token_times: list[float] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)  # per reply token, when the request asked
    _held: str = ""  # text held back while it could still be the start of a stop string
    stopping_word: str = ""  # the stop string that ended the reply (llama-server's name); "" for any other end

    def __post_init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop_len = max((len(s) for s in self.stop), default=0)

    @property
    def prefilling(self) -> bool:
        return self.n_prefilled < len(self.prompt)

    def accept(self, token: int, is_eog: bool, piece: bytes, now: float) -> str:
        """Take a sampled token; returns the text that may be streamed now (maybe empty: a token that
        detokenizes to nothing, or text held back while it may begin a stop string). A reply token is
        counted in `emitted` either way (an end-of-generation token is not): it is streamed as one chunk.

        Sets `finish` when the reply is over; the token is then not fed back."""
        self.generated += 1
        if self.generated == 1:
            self.t_first = now
        if is_eog and not self.ignore_eos:
            self.finish = "stop"
            self.pending = None
            return ""
        self.token_times.append(now)
        out = ""
        text = self._decoder.decode(piece)
        if text:
            self._held += text
            hit = find_stop(self._held, self.stop)
            if hit is not None:
                self.stopping_word = min((s for s in self.stop if s and s in self._held), key=self._held.find)
                self._held = self._held[:hit]
                self.finish = "stop"
            keep = 0 if self.finish else (self._stop_len - 1 if self._stop_len else 0)
            cut = max(0, len(self._held) - keep)
            out, self._held = self._held[:cut], self._held[cut:]
        if self.finish is None and self.generated >= self.max_tokens:
            self.finish = "length"
        if self.finish == "length" and self._held:
            out, self._held = out + self._held, ""
        self.pending = token if self.finish is None else None
        if out:
            self.text_parts.append(out)
        self.emitted += 1  # every reply token is streamed, as llama-server does: clients see progress
        return out

    def timings(self, now: float | None = None) -> dict[str, Any]:
        """llama-server's `timings` block, plus TTFT, queueing and inter-token latencies."""
        now = time.monotonic() if now is None else now
        first = self.t_first or now
        prompt_n = len(self.prompt) - self.n_cached
        prompt_ms = max(0.0, (first - self.t_admit) * 1000.0) if self.t_admit else 0.0
        times = self.token_times
        predicted_n = self.generated
        predicted_ms = (times[-1] - first) * 1000.0 if times else 0.0
        return {
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
            "prompt_per_second": prompt_n * 1000.0 / prompt_ms if prompt_ms > 0 else 0.0,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / (predicted_n - 1) if predicted_n > 1 else 0.0,
            "predicted_per_second": (predicted_n - 1) * 1000.0 / predicted_ms if predicted_ms > 0 else 0.0,
            "cache_n": self.n_cached,
            "ttft_ms": (first - self.t_submit) * 1000.0 if self.t_first else 0.0,
            "queue_ms": max(0.0, (self.t_admit - self.t_submit) * 1000.0) if self.t_admit else 0.0,
            "itl_ms": [(b - a) * 1000.0 for a, b in itertools.pairwise(times)],
            "prefill_steps": self.prefill_steps,
            "t_admit": self.t_admit,  # engine monotonic clock, like Token.t
            "t_first": self.t_first,
            "prompt_tokens": len(self.prompt),
            "completion_tokens": self.generated,
            **self._grammar_timings(predicted_n, predicted_ms),
            "stopping_word": self.stopping_word,
            **({"logprobs": self.logprobs} if self.sampler.logprobs_top is not None else {}),
        }

    def _grammar_timings(self, predicted_n: int, predicted_ms: float) -> dict[str, Any]:
        """What the grammar cost (nothing without one): see app.core.sampling.constraint.grammar_timings."""
        c = self.sampler.constraint
        return {} if c is None else grammar_timings(c, predicted_n, predicted_ms)
