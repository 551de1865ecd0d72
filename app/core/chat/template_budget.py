"""A chat template render's budget, per thread: its steps, its CPU time and the characters it may produce.

app/core/chat/template_sandbox.py counts every loop item, call and filter against it (`tick`), and checks each
operation that makes a string or list before it runs (`expect`, `produce`); the engine opens a budget around
each render (`start_budget` / `end_budget`, app/core/chat/templates.py). Seconds are the rendering thread's CPU
time, not the wall clock: a runaway template burns CPU either way, while a normal one on a busy machine is not
taken for hostile.
"""

from __future__ import annotations

import threading
import time

from jinja2.exceptions import SecurityError

MAX_STEPS = 1_000_000  # a real template takes a few dozen steps a message
MAX_CHARS = 16_000_000  # characters produced by all checked operations in one render
MAX_PIECE = 4_000_000  # the longest single string or list one operation may produce
SMALL = 1024  # results up to this size are not accounted for (the step budget bounds how many there are)
_CLOCK_EVERY = 64  # steps between clock checks (time.thread_time is cheap but not free)


class _Budget:
    # Seconds of this thread's CPU time, not of the wall clock: a runaway template burns CPU either way, while a
    # normal one on a busy machine (other apps, a build, the decode of other streams) is not taken for hostile.
    def __init__(self, seconds: float, steps: int):
        self.deadline = time.thread_time() + seconds
        self.steps_left = steps
        self.chars_left = MAX_CHARS
        self.seconds = seconds


_local = threading.local()


def _budget() -> _Budget | None:
    return getattr(_local, "budget", None)


def start_budget(seconds: float, steps: int | None = None) -> None:
    """Give the renders that follow on this thread `seconds` of CPU time and `steps` (default
    MAX_STEPS) steps."""
    _local.budget = _Budget(seconds, MAX_STEPS if steps is None else steps)


def end_budget() -> None:
    _local.budget = None


def tick() -> None:
    b = getattr(_local, "budget", None)
    if b is None:
        return
    b.steps_left -= 1
    if b.steps_left < 0:
        raise SecurityError("the template ran too many steps")
    if b.steps_left % _CLOCK_EVERY == 0:
        check_clock()


def check_clock() -> None:
    """The render's clock (its thread's CPU time), also checked from inside long scans and before big allocations."""
    b = _budget()
    if b is not None and time.thread_time() > b.deadline:
        raise SecurityError(f"the template ran longer than {b.seconds:g} s")


def expect(n: int, what: str) -> None:
    """Refuse an operation about to produce at most `n` characters (or items) when they would not fit; what it
    really makes is accounted for afterwards."""
    b = _budget()
    if n > MAX_PIECE or (b is not None and n > b.chars_left):
        raise SecurityError(f"{what} would make a value of {n:,} characters" if n > MAX_PIECE
                            else "the template produced too much text")
    if n > SMALL:
        check_clock()


def produce(n: int, what: str) -> None:
    """Account for an operation about to produce `n` characters (or items)."""
    expect(n, what)
    if (b := _budget()) is not None:
        b.chars_left -= n
