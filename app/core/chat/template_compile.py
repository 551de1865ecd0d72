"""The compile budget of GGUF chat templates: a template is refused before it is parsed, or while it is, when it
is too big or takes too long to compile, so a hostile one cannot stall the engine before its render budget starts.

- Before parsing: at most `MAX_TEMPLATE_CHARS` characters (real templates are a few KB; the GGUF format allows
  64 MiB).
- While parsing: at most `MAX_TEMPLATE_TOKENS` tokens, counted as the parser reads them; then at most
  `MAX_TEMPLATE_NODES` nodes in the parsed tree, counted by the sandbox's rewrite. Both bound what Jinja's
  code generator and Python's `compile()` get, which cannot be stopped halfway.
- Throughout: `MAX_COMPILE_SECONDS` of the thread's CPU time, checked every few hundred tokens, nodes and
  generated nodes.

The sandbox's rewrite of the tree (loops counted, `~` checked) is one walk over it, each node visited once: it
used to search the whole tree again for every `~`, which made a template of n concatenations cost n² steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError
from jinja2.lexer import Token

MAX_TEMPLATE_CHARS = 256 * 1024  # the biggest real chat templates (tool calling, reasoning) are under 20 KB
MAX_TEMPLATE_TOKENS = 20_000  # real templates: a few hundred (llama 3, qwen 3) to a few thousand (tool calling)
MAX_TEMPLATE_NODES = 10_000  # real templates: about one per 12 characters; this many compile in about a second
MAX_COMPILE_SECONDS = 2.0
_CHECK_EVERY = 256  # tokens, nodes or generated nodes between clock checks


class TemplateTooBig(SecurityError):
    """A template past the compile budget, refused before or while it was parsed."""


class _Budget:
    def __init__(self) -> None:
        self.deadline = time.thread_time() + MAX_COMPILE_SECONDS

    def check_clock(self) -> None:
        if time.thread_time() > self.deadline:
            raise TemplateTooBig(f"the template took longer than {MAX_COMPILE_SECONDS:g} s to compile")


_local = threading.local()


def current() -> _Budget | None:
    return getattr(_local, "budget", None)


@contextmanager
def compile_budget(source: Any) -> Iterator[_Budget]:
    """The budget of the compile now running on this thread, or a new one for `source` (checked for size first,
    before anything reads it)."""
    outer = current()
    if outer is not None:
        yield outer
        return
    if isinstance(source, str) and len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateTooBig(f"the template is {len(source):,} characters long (at most {MAX_TEMPLATE_CHARS:,})")
    _local.budget = budget = _Budget()
    try:
        yield budget
    finally:
        _local.budget = None


def counted_tokens(stream: Iterable[Token], budget: _Budget) -> Iterator[Token]:
    """The lexer's tokens as the parser pulls them (the lexer runs lazily, so this bounds lexing too)."""
    for n, token in enumerate(stream, 1):
        if n > MAX_TEMPLATE_TOKENS:
            raise TemplateTooBig(f"the template has more than {MAX_TEMPLATE_TOKENS:,} tokens")
        if n % _CHECK_EVERY == 0:
            budget.check_clock()
        yield token


def checked_node(node: nodes.Node) -> nodes.Node:
    """What the sandbox puts in the tree for `node`: a loop's items through its `_steps` filter (a step each),
    `a ~ b` through its `_concat` filter (the size check)."""
    if isinstance(node, nodes.For):
        node.iter = nodes.Filter(node.iter, "_steps", [], [], None, None, lineno=node.lineno)
    elif isinstance(node, nodes.Concat):
        parts = nodes.List(list(node.nodes), lineno=node.lineno)
        return nodes.Filter(parts, "_concat", [], [], None, None, lineno=node.lineno)
    return node


def rewrite(tree: nodes.Node, budget: _Budget, replace: Callable[[nodes.Node], nodes.Node] = checked_node) -> int:
    """Replace every node of `tree` by `replace(node)`, parents before their children (so `replace` sees each
    original node once and the nodes it puts in are walked too); one visit per node. Returns the nodes visited."""
    stack = [tree]
    visited = 0
    while stack:
        node = stack.pop()
        visited += 1
        if visited > MAX_TEMPLATE_NODES:
            raise TemplateTooBig(f"the template has more than {MAX_TEMPLATE_NODES:,} nodes")
        if visited % _CHECK_EVERY == 0:
            budget.check_clock()
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, nodes.Node):
                child = replace(value)
                setattr(node, field, child)
                stack.append(child)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, nodes.Node):
                        value[i] = child = replace(item)
                        stack.append(child)
    return visited


class BudgetedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with the compile clock checked as it goes."""

    _visits = 0

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        self._visits += 1
        if self._visits % _CHECK_EVERY == 0 and (budget := current()) is not None:
            budget.check_clock()
        return super().visit(node, *args, **kwargs)
