"""A forced tool call's constraint on sampling: one of the allowed function names (when the prompt left the choice
open), then one JSON object, then the end — checked byte by byte on each candidate token's text.

This is the prefix-forcing fallback of `tool_choice` required / named (app/core/chat/tool_choice.py): the prompt
already ends with the family's call opening, and this automaton keeps the model's next bytes to "NAME<sep>"
for one of the tools and a syntactically valid JSON object after it. It knows JSON's syntax, not the tool's
parameter schema (a grammar engine, given `ForcedCall.json_schema`, can enforce that too). Bounds on depth,
string length, items and whitespace make every path end: a model that would go on forever is left only the
closing tokens.

`pick` applies it to one logits row: the sampler's own distribution filtered to the allowed tokens, else (none
of the likely tokens fit) the most likely allowed token of the whole vocabulary. Pure Python and numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.core.sampling.chain import Sampler

MAX_DEPTH = 6
MAX_STRING = 200  # bytes in one string: then only its closing quote is allowed
MAX_ITEMS = 24  # members of one object or array: then only its closing bracket
MAX_NUMBER = 20
WS = b" \t\n\r"
_NUM = b"0123456789"

# modes
VALUE, FIRST_KEY, KEY, COLON, AFTER, FIRST_ITEM, STRING, ESCAPE, UNICODE, NUMBER, LITERAL, DONE = range(12)


@dataclass
class CallConstraint:
    """The automaton's state; `allows` tries a piece on a copy, `feed` commits it."""

    options: tuple[bytes, ...] = ()  # "NAME<sep>" choices still to be written first (empty: the name is given)
    chosen: bytes = b""
    mode: int = VALUE
    stack: tuple[tuple[str, int], ...] = ()  # open containers: ("o" | "a", members so far)
    is_key: bool = False
    run: int = 0  # bytes of the current string / number; hex digits of a \\u escape
    number: bytes = b""
    literal: bytes = b""  # what is left of true / false / null
    last_ws: bool = False
    started: bool = False

    @property
    def done(self) -> bool:
        return self.mode == DONE

    def allows(self, piece: bytes) -> bool:
        return bool(piece) and replace(self).feed(piece)

    def feed(self, piece: bytes) -> bool:
        """Advance by `piece`; False (the state then undefined: use `allows` first) when it breaks the syntax."""
        for b in piece:
            if not self._byte(b):
                return False
        return True

    # ------------------------------------------------------------------ the name
    def _choose(self, b: int) -> bool:
        chosen = self.chosen + bytes([b])
        matching = [o for o in self.options if o.startswith(chosen)]
        if not matching:
            return False
        self.chosen = chosen
        if chosen in matching:
            self.options = ()
        return True

    # ------------------------------------------------------------------ JSON
    def _byte(self, b: int) -> bool:
        if self.options:
            return self._choose(b)
        mode = self.mode
        if mode == DONE:
            return False
        if mode == STRING:
            return self._string(b)
        if mode == ESCAPE:
            if b == ord("u"):
                self.mode, self.run = UNICODE, 0
                return True
            if b in b'"\\/bfnrt':
                self.mode = STRING
                return True
            return False
        if mode == UNICODE:
            if b not in b"0123456789abcdefABCDEF":
                return False
            self.run += 1
            if self.run == 4:
                self.mode, self.run = STRING, 0
            return True
        if mode == LITERAL:
            if b != self.literal[0]:
                return False
            self.literal = self.literal[1:]
            if not self.literal:
                self._value_done()
            return True
        if mode == NUMBER:
            if self._number(b):
                return True
            if not self._number_complete():
                return False
            self._value_done()
            return self._byte(b)
        if b in WS:
            if self.last_ws or not self.started:
                return False
            self.last_ws = True
            return True
        self.last_ws = False
        return self._structural(b)

    def _structural(self, b: int) -> bool:
        mode, c = self.mode, chr(b)
        if mode in (VALUE, FIRST_ITEM):
            if mode == FIRST_ITEM and c == "]":
                return self._close("a")
            return self._start_value(c)
        if mode in (FIRST_KEY, KEY):
            if mode == FIRST_KEY and c == "}":
                return self._close("o")
            if c != '"':
                return False
            self.mode, self.is_key, self.run = STRING, True, 0
            return True
        if mode == COLON:
            if c != ":":
                return False
            self.mode = VALUE
            return True
        if mode == AFTER:
            kind, members = self.stack[-1]
            if c == ",":
                if members >= MAX_ITEMS:
                    return False
                self.mode = KEY if kind == "o" else VALUE
                return True
            return self._close(kind) if c in "}]" and c == ("}" if kind == "o" else "]") else False
        return False

    def _start_value(self, c: str) -> bool:
        if not self.started:  # the arguments: an object
            if c != "{":
                return False
            self.started = True
        if c in "{[":
            if len(self.stack) >= MAX_DEPTH:
                return False
            self.stack = (*self.stack, ("o" if c == "{" else "a", 0))
            self.mode = FIRST_KEY if c == "{" else FIRST_ITEM
            return True
        if c == '"':
            self.mode, self.is_key, self.run = STRING, False, 0
            return True
        if c in "-0123456789":
            self.mode, self.number = NUMBER, c.encode()
            return True
        for word in (b"true", b"false", b"null"):
            if ord(c) == word[0]:
                self.mode, self.literal = LITERAL, word[1:]
                return True
        return False

    def _string(self, b: int) -> bool:
        if b == ord('"'):
            if self.is_key:
                self.mode = COLON
            else:
                self._value_done()
            return True
        if self.run >= MAX_STRING or b < 0x20:
            return False
        self.run += 1
        if b == ord("\\"):
            self.mode = ESCAPE
        return True

    def _number(self, b: int) -> bool:
        n = self.number + bytes([b])
        if len(n) > MAX_NUMBER:
            return False
        ok = _valid_number_prefix(n)
        if ok:
            self.number = n
        return ok

    def _number_complete(self) -> bool:
        return _valid_number_prefix(self.number, complete=True)

    def _value_done(self) -> None:
        if not self.stack:
            self.mode = DONE
            return
        kind, members = self.stack[-1]
        self.stack = (*self.stack[:-1], (kind, members + 1))
        self.mode = AFTER

    def _close(self, kind: str) -> bool:
        self.stack = self.stack[:-1]
        self._value_done()
        return True


def call_constraint(forced: dict[str, Any] | None) -> CallConstraint | None:
    """The constraint of a forced call as the engine receives it (ForcedCall.to_wire), or None."""
    if not forced:
        return None
    return CallConstraint(options=tuple(str(o).encode("utf-8") for o in forced.get("options") or ()))


def _valid_number_prefix(n: bytes, complete: bool = False) -> bool:
    """Whether `n` can begin (or, `complete`, is) a JSON number."""
    s = n.decode("ascii", "replace")
    i = 1 if s.startswith("-") else 0
    if i == len(s):
        return not complete
    if s[i] == "0":
        i += 1
    elif s[i].isdigit():
        while i < len(s) and s[i].isdigit():
            i += 1
    else:
        return False
    if i < len(s) and s[i] == ".":
        i += 1
        if i == len(s):
            return not complete
        start = i
        while i < len(s) and s[i].isdigit():
            i += 1
        if i == start:
            return False
    if i < len(s) and s[i] in "eE":
        i += 1
        if i < len(s) and s[i] in "+-":
            i += 1
        if i == len(s):
            return not complete
        start = i
        while i < len(s) and s[i].isdigit():
            i += 1
        if i == start:
            return False
    return i == len(s)


def pick(sampler: Sampler, row: np.ndarray, allowed: Callable[[int], bool], scan: int = 4096) -> int | None:
    """The next token under the constraint: drawn from the sampler's distribution restricted to allowed tokens
    (accepted into its penalty history), else the most likely allowed one among the `scan` best of the row.
    None when none of those is allowed."""
    ids, probs = sampler.distribution(row)
    keep = [(int(t), float(p)) for t, p in zip(ids, probs, strict=True) if allowed(int(t))]
    token: int | None = None
    if keep:
        total = sum(p for _, p in keep)
        r = sampler._rng.random() * total
        acc = 0.0
        for token, p in keep:  # noqa: B007 - the last one stands if r rounds up
            acc += p
            if acc > r:
                break
    else:  # the likeliest allowed token: among the `scan` best first, then (rarely) the whole vocabulary
        x = row[: sampler.n_vocab]
        n = min(scan, sampler.n_vocab)
        best = np.argpartition(-x, n - 1)[:n]
        for order in (best[np.argsort(-x[best])], np.argsort(-x)):
            token = next((int(t) for t in order if allowed(int(t))), None)
            if token is not None:
                break
    if token is not None:
        sampler.accept(token)
    return token
