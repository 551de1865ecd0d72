"""Validators for the CLI's numeric options, used as argparse `type=` functions.

A bad value is refused at the edge with one line naming the option, the rule and what was given
(argparse adds the option's name and exits with status 2), so no command ever starts a model load
with a negative thread count, an empty repetition list or a NaN temperature.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

# llama.cpp keeps sizes, thread counts and seeds in 32-bit fields; anything above cannot be meant.
INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
MAX_TOKENS = 1 << 24  # prompt / generation / depth sizes: far beyond any context a machine can hold
MAX_REPETITIONS = 1000
# The bound of settings.MAX_THREADS (llama.cpp's thread pool takes 512; 1024 failed to start its threads),
# repeated rather than imported: settings pulls in pydantic, which no command needs just to parse its options.
MAX_THREADS = 256


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _check_range(value: float, lo: float | None, hi: float | None, text: str) -> None:
    if lo is not None and value < lo:
        raise argparse.ArgumentTypeError(f"must be at least {lo}, got {text!r}")
    if hi is not None and value > hi:
        raise argparse.ArgumentTypeError(f"must be at most {hi}, got {text!r}")


def int_range(lo: int | None = None, hi: int | None = INT32_MAX) -> Callable[[str], int]:
    """An integer in [lo, hi]."""

    def parse(text: str) -> int:
        value = _parse_int(text)
        _check_range(value, lo, hi, text)
        return value

    parse.__name__ = "int"  # argparse names the type in some messages
    return parse


def int_list(lo: int = 0, hi: int = MAX_TOKENS) -> Callable[[str], list[int]]:
    """A non-empty comma-separated list of integers, each in [lo, hi] (e.g. "128,256,512")."""

    def parse(text: str) -> list[int]:
        parts = [x for x in text.split(",") if x.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}")
        values = []
        for part in parts:
            try:
                value = int(part.strip())
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected comma-separated whole numbers, got {text!r}") from None
            _check_range(value, lo, hi, part.strip())
            values.append(value)
        return values

    parse.__name__ = "list of integers"
    return parse


def float_range(lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable[[str], float]:
    """A finite number in [lo, hi] (or (lo, hi] with lo_open)."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if lo_open and lo is not None and value <= lo:
            raise argparse.ArgumentTypeError(f"must be greater than {lo}, got {text!r}")
        _check_range(value, lo, hi, text)
        return value

    parse.__name__ = "float"
    return parse


# The options several commands share, named once so every command applies the same rule.
repetitions = int_range(1, MAX_REPETITIONS)
threads = int_range(1, MAX_THREADS)
threads_or_zero = int_range(0, MAX_THREADS)  # 0: all cores
gpu_layers = int_range(-1, INT32_MAX)  # -1: every layer
batch_size = int_range(1, INT32_MAX)
context_size = int_range(1, INT32_MAX)
token_count = int_range(1, MAX_TOKENS)
seed = int_range(0, UINT32_MAX)
