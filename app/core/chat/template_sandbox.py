"""The Jinja sandbox GGUF chat templates run in: no Python internals, and bounded time, steps and memory.

Jinja's immutable sandbox already refuses attribute walks into Python internals. A template can still spin or
allocate without producing output, so checks that only look at what it yields come too late. Here:

- Steps: every loop item (the loop's iterable is wrapped when the template is parsed, filtered loops
  included), every call (macros too) and every filter counts one step. Past `MAX_STEPS`, or past the CPU-time
  deadline (checked every few steps), the render stops with `SecurityError`.
- Sizes: every operation that makes a string or list from others is checked *before* it runs — `~`, `+`, `*`,
  `**`, `%`-formatting (its widths and the values its keys pick), `str.format` (field by field, as the formatter
  reaches it), `replace`, `join`, `translate`, `expandtabs` and padding methods, the `replace`/`join`/`format`/
  `center`/`indent`/`slice`/`batch`/`sum` filters, every filter that can grow its input (`tojson` with an indent,
  `wordwrap`, `urlize`, `escape` ...), and `{{ value }}` itself — from an estimate of the result read off the
  inputs (app/core/chat/template_sizes.py), never by building it first; and the characters all of them produce in one
  render are added up against `MAX_CHARS`. `lipsum` (a text generator no chat template needs) is removed.
- Compiling: the template's size, tokens, nodes and compile time are bounded before and while it is parsed
  (app/core/chat/template_compile.py).

What real templates need beyond plain Jinja, as `transformers` and llama.cpp give it to them: the loop controls
`{% break %}` / `{% continue %}` (jinja2.ext.loopcontrols; a loop left early simply takes fewer steps) and
`strftime_now(format)` (Llama 3.x writes today's date into its system block), with a bounded format.

What is left (a filter fed a huge value in a loop, a MemoryError deep in Python) is caught by `render`, and the
engine process that renders templates runs under address-space and CPU limits (app/engine/limits.py).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterable, Iterator
from functools import update_wrapper, wraps
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.lexer import TokenStream
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter

from app.core.chat import template_compile, template_sizes
from app.core.chat.template_budget import MAX_PIECE, SMALL, check_clock, expect, produce, tick
from app.core.chat.template_sizes import field_size, filter_size, percent_size

MAX_REPEAT = 100_000  # 'x' * n, [..] * n, str.center(n), format widths
MAX_INT_BITS = 4096  # integers past ~1200 decimal digits are not chat formatting
MAX_DATE_FORMAT = 256  # a date format in a chat template is a few directives; each expands to < 64 characters


def _size(value: Any) -> int:
    return template_sizes.printed_size(value, MAX_PIECE, check_clock)


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        tick()
        yield item


def _bounded_concat(parts: list[Any]) -> str:
    produce(sum(_size(p) for p in parts), "'~'")
    return "".join(str(p) for p in parts)


def _check_percent(fmt: str | bytes, args: Any) -> None:
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else fmt
    n = percent_size(text, args, MAX_PIECE, check_clock)
    produce(5 * n if hasattr(fmt, "__html__") else n, "'%'")  # Markup escapes what it formats: '&' -> '&amp;'


class _FieldsChecked(SandboxedFormatter):
    """`str.format` as Jinja's sandbox runs it, each field checked before it is formatted and the whole call
    held to MAX_PIECE: a width ('{0:99999}'), a width taken from the arguments ('{:{}}') or a value repeated
    ('{0}{0}...') is refused before the text is built."""

    made = 0

    def _expect(self, n: int) -> None:
        tick()  # a field is a step, and the clock is checked inside one long format call
        n *= 5 if isinstance(self, SandboxedEscapeFormatter) else 1  # Markup escapes each field: '&' -> '&amp;'
        produce(n, "str.format")
        self.made += n
        if self.made > MAX_PIECE:
            raise SecurityError(f"str.format would make a value of over {MAX_PIECE:,} characters")

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion in ("r", "a"):
            self._expect(template_sizes.repr_size(value, MAX_PIECE, check_clock))
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self._expect(field_size(value, format_spec, MAX_PIECE))
        return super().format_field(value, format_spec)


class _EscapeFieldsChecked(_FieldsChecked, SandboxedEscapeFormatter):
    """The same for `Markup.format`, which escapes every field."""


def _format(fmt: str, args: tuple[Any, ...], kwargs: Any, env: Any) -> str:
    markup = hasattr(fmt, "__html__")  # markupsafe's Markup (from `|safe`), whose format escapes each field
    escape = getattr(type(fmt), "escape", None)
    formatter = _EscapeFieldsChecked(env, escape=escape) if markup and escape else _FieldsChecked(env)
    floor = template_sizes.format_floor(fmt, check_clock)  # its literal text and widths: '{0:99999}' * 11111
    expect(floor * (5 if markup else 1), "str.format")
    return type(fmt)(formatter.vformat(fmt, args, kwargs))


def _check_replace(s: Any, old: Any, new: Any, count: Any = -1) -> None:
    old, new = (str(old), str(new)) if isinstance(s, str) else (old, new)
    if not isinstance(old, (str, bytes)) or not isinstance(new, (str, bytes)):
        return  # Python refuses them
    hits = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    produce(len(s) + hits * max(0, len(new) - len(old)), "replace")


def _check_join(sep: str | bytes, items: list[Any]) -> None:
    produce(sum(_size(i) for i in items) + len(sep) * max(0, len(items) - 1), "join")


def strftime_now(fmt: Any = "%Y-%m-%d") -> str:
    """The local date and time in `fmt` (the `strftime_now` global transformers and llama.cpp give templates)."""
    fmt = str(fmt)
    if len(fmt) > MAX_DATE_FORMAT:
        raise SecurityError("the date format is too long")
    produce(64 * len(fmt), "strftime_now")
    return datetime.datetime.now().strftime(fmt)


def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
           sort_keys: bool = False) -> str:
    """`tojson` as `transformers` (and llama.cpp) give it to templates: plain JSON in the object's own key order,
    not Jinja's HTML-safe variant (keys sorted, `<` as \\u003c, a Markup that escapes what it is added to),
    so a tool's schema reads as its author wrote it."""
    if separators is not None and sum(len(str(x)) for x in separators) > 16:
        raise SecurityError("tojson separators too long")  # the size estimate counts one-character ones
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the step, time and size budgets described above."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])
    code_generator_class = template_compile.BudgetedCodeGenerator

    def __init__(self, **kwargs: Any):
        extensions = [*kwargs.pop("extensions", ()), "jinja2.ext.loopcontrols"]
        super().__init__(finalize=_finalize, extensions=extensions, **kwargs)
        self.globals.pop("lipsum", None)
        self.globals["strftime_now"] = strftime_now
        self.filters["tojson"] = tojson
        self.filters = {name: _filter_with_steps(f, name) for name, f in self.filters.items()}
        self.filters.update(_bounded_filters(self.filters))
        self.filters["_steps"] = _counted
        self.filters["_concat"] = _bounded_concat

    def compile(self, source: Any, *args: Any, **kwargs: Any) -> Any:
        with template_compile.compile_budget(source):  # refuses an oversized source before parsing
            return super().compile(source, *args, **kwargs)

    def _tokenize(self, source: str, name: str | None, filename: str | None = None, state: str | None = None
                  ) -> TokenStream:
        stream = super()._tokenize(source, name, filename, state)
        budget = template_compile.current()
        return stream if budget is None else TokenStream(template_compile.counted_tokens(stream, budget), name,
                                                         filename)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        with template_compile.compile_budget(source) as budget:
            tree = super()._parse(source, name, filename)
            # Loops count a step per item (the `_steps` filter); `a ~ b` goes through a size check (`_concat`).
            # Done on the tree so the compiled code of every template, whatever its shape, carries the checks.
            template_compile.rewrite(tree, budget)
            return tree

    def _compile(self, source: str, filename: str) -> Any:
        if (budget := template_compile.current()) is not None:
            budget.check_clock()  # Python's compile() cannot be stopped halfway: the node budget bounds it
        return super()._compile(source, filename)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        # Hot path (every `+` of a template goes through here): loops and calls already count the steps, so a
        # binop only checks what it is about to build, and small results are not worth accounting for.
        if operator == "+":
            if isinstance(left, str) and isinstance(right, str):
                n = len(left) + len(right)
                if n > SMALL:
                    produce(n, "'+'")
            elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
                produce(_size(left) + _size(right), "'+'")
        elif operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int):
                    if n * max(1, len(seq)) > MAX_REPEAT:
                        raise SecurityError("repetition too large")
                    produce(n * _size(seq), "'*'")
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise SecurityError("number too large")
        elif operator == "**" and isinstance(right, int) and isinstance(left, int):
            if abs(right) > 64 or abs(left).bit_length() * abs(right) > MAX_INT_BITS:
                raise SecurityError("exponent too large")
        elif operator == "%" and isinstance(left, (str, bytes)):
            _check_percent(left, right)
        return self.binop_table[operator](left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's API)
        tick()
        name = getattr(__obj, "__name__", "")
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (str, bytes)):
            values = (*args, *kwargs.values())
            if name == "replace" and len(args) >= 2:
                _check_replace(owner, *args[:3])
            elif name == "join" and args:
                items = list(_counted(args[0]))
                _check_join(owner, items)
                args = (items, *args[1:])
            elif name in ("format", "format_map") and (checked := __self.wrap_str_format(__obj)) is not None:
                return checked(*args, **kwargs)  # Jinja < 3.1.5 hands `call` the method itself
            elif name == "expandtabs":
                produce(template_sizes.expandtabs_size(owner, *values[:1]), "expandtabs")
            elif name in ("center", "ljust", "rjust", "zfill") and values and isinstance(values[0], int):
                produce(max(len(owner), values[0]), name)
            elif name == "translate" and isinstance(owner, str) and values:
                produce(template_sizes.translate_size(owner, values[0]), "translate")
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, str) and len(result) > SMALL:
            produce(len(result), name or "a call")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        # Jinja >= 3.1.5 hands templates a wrapper for `str.format` when the attribute is read (so `call` never
        # sees the bound method); this one runs the formatter that checks every field before it is made.
        if getattr(value, "__name__", None) not in ("format", "format_map") or not isinstance(
                getattr(value, "__self__", None), str):
            return None
        fmt, is_map = value.__self__, value.__name__ == "format_map"

        def checked(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                return _format(fmt, (), args[0], self)
            return _format(fmt, args, kwargs, self)

        return update_wrapper(checked, value)

    def call_filter(self, name: str, value: Any, args: Any = None, kwargs: Any = None, context: Any = None,
                    eval_ctx: Any = None) -> Any:
        tick()  # `map`, `select` and friends call filters through here, once per item
        result = super().call_filter(name, value, args, kwargs, context, eval_ctx)
        if isinstance(result, str) and len(result) > SMALL:
            produce(len(result), f"the {name} filter")
        return result


def _finalize(value: Any) -> Any:
    """Every `{{ value }}` passes here before it becomes text: a list is checked for what it would print."""
    if isinstance(value, (list, tuple, dict)):
        produce(_size(value), "printing a value")
    return value


def _filter_with_steps(f: Callable[..., Any], name: str = "") -> Callable[..., Any]:
    value_at = 1 if getattr(f, "jinja_pass_arg", None) is not None else 0  # after a context/environment
    sized, keeps_strings = name in template_sizes.SIZED_FILTERS, name in template_sizes.KEEPS_STRINGS

    @wraps(f)  # keeps Jinja's pass_context / pass_environment marks
    def stepped(*args: Any, **kwargs: Any) -> Any:
        tick()
        if sized and len(args) > value_at and not (keeps_strings and isinstance(args[value_at], str)):
            # what the filter can make of its input, before it runs
            n = filter_size(name, args[value_at], args[value_at + 1:], kwargs, MAX_PIECE, check_clock)
            if n is not None and n > SMALL:
                expect(n, f"the {name} filter")
        result = f(*args, **kwargs)
        if isinstance(result, str) and len(result) > SMALL:
            produce(len(result), f"the {f.__name__} filter")
        return result

    return stepped


def _bounded_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    from jinja2.filters import do_center, do_indent

    join, replace, fmt, slice_, sum_, batch = (filters[k] for k in ("join", "replace", "format", "slice", "sum",
                                                                    "batch"))

    def center(value: Any, width: int = 80) -> str:
        if isinstance(width, int) and width > MAX_REPEAT:
            raise SecurityError("padding width too large")
        return do_center(value, width)

    def indent(s: str, width: Any = 4, first: bool = False, blank: bool = False) -> str:
        if isinstance(width, int) and width > 1000:
            raise SecurityError("indent width too large")
        if isinstance(width, str) and len(width) > 1000:
            raise SecurityError("indent too long")
        produce(len(str(s)) * (1 + (len(width) if isinstance(width, str) else int(width))), "indent")
        return do_indent(s, width, first, blank)

    @wraps(replace)
    def bounded_replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> Any:
        _check_replace(str(s), old, new, -1 if count is None else count)
        return replace(eval_ctx, s, old, new, count)

    @wraps(join)
    def bounded_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        items = list(_counted(value))
        _check_join(str(d), items)
        return join(eval_ctx, items, d, attribute)

    def bounded_format(value: Any, *args: Any, **kwargs: Any) -> Any:
        _check_percent(str(value), kwargs or args)
        return fmt(value, *args, **kwargs)

    def bounded_batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
        if isinstance(linecount, int) and linecount > MAX_REPEAT:
            raise SecurityError("batches too large")
        return batch(value, linecount, fill_with)

    def bounded_slice(value: Any, slices: int, fill_with: Any = None) -> Any:
        if isinstance(slices, int) and slices > MAX_REPEAT:
            raise SecurityError("too many slices")
        return slice_(value, slices, fill_with)

    @wraps(sum_)
    def bounded_sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        items = list(_counted(iterable))
        if isinstance(start, (list, tuple, str)) or any(isinstance(i, (list, tuple)) for i in items[:1]):
            produce(_size(start) + sum(_size(i) for i in items), "sum")
        return sum_(environment, items, attribute, start)

    return {"center": _filter_with_steps(center, "center"), "indent": _filter_with_steps(indent),
            "replace": _filter_with_steps(bounded_replace), "join": _filter_with_steps(bounded_join),
            "format": _filter_with_steps(bounded_format), "slice": _filter_with_steps(bounded_slice),
            "batch": _filter_with_steps(bounded_batch),
            "sum": _filter_with_steps(bounded_sum)}
