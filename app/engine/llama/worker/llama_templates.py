"""Loading a model without llama-cpp-python compiling its chat templates.

`llama_cpp.Llama()` builds a `Jinja2ChatFormatter` for every chat template in the GGUF's metadata as it loads,
each compiled in a plain Jinja environment with no bound on size or time: a 2.2 MB template holds the load
for minutes, before the app's own checks can say anything. The app never uses those formatters: it renders
chat templates itself, in its sandbox and under a compile budget (app/core/chat/template_sandbox.py,
app/core/chat/template_compile.py). So every `Llama()` the engine builds runs inside `templates_left_to_the_app()`,
which swaps in a formatter that compiles nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import llama_cpp.llama_chat_format as chat_format

_lock = threading.Lock()
_depth = 0  # loads in progress (a draft model may load beside the main one)
_original: Any = None


class _NotCompiled:
    """Takes the place of llama-cpp-python's Jinja2ChatFormatter while a model loads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def to_chat_handler(self) -> Any:
        return _unused


def _unused(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("llama-cpp-python's chat handlers are not used: the app renders chat templates itself")


@contextmanager
def templates_left_to_the_app() -> Iterator[None]:
    global _depth, _original
    with _lock:
        if _depth == 0:
            _original = chat_format.Jinja2ChatFormatter
            chat_format.Jinja2ChatFormatter = _NotCompiled  # type: ignore[misc,assignment]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                chat_format.Jinja2ChatFormatter = _original  # type: ignore[misc]
