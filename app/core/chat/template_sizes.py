"""How long a chat template's string operation is about to make its result, estimated from its inputs before it runs.

The template sandbox (app/core/chat/template_sandbox.py) refuses an operation whose estimate is past the render's
budget, so nothing here may come out below what the operation really builds: every function is an upper bound,
close for what real templates do (a message through `trim`, a tool list through `tojson`) and generous where the
exact figure would cost as much as the operation itself (the escapes of a string that is not printable ASCII).
Nothing here allocates in proportion to the result: widths are read from the format spec, `%` and `str.format`
are scanned, not run, and containers are walked once, a shared item (`[big] * 100000`) measured once.

Long scans call `every` now and then, so the sandbox can check its clock inside one call.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

HUGE = 1 << 62  # a width or count too long to read: past every budget
_OTHER = 100  # what an object that is no string, number or container prints (a macro, a loop, undefined)
_EVERY = 4096  # loop turns between calls of `every`
_DIGITS = 12  # a width or precision with more digits is past any budget; not converted (int() of 10^6 digits)


def _nothing() -> None:
    return None


def _number(value: Any, precision: int | None = None, binary: bool = False) -> int:
    """Characters of a number in any format (%d, %x, %e, {:,.2f}, {:b} ...): digits, precision, sign and prefix."""
    if isinstance(value, float):
        whole = int(abs(value)) if math.isfinite(value) else 0
    elif isinstance(value, int):
        whole = value
    else:
        return _OTHER
    bits = abs(whole).bit_length()
    digits = bits + 2 if binary else bits // 3 + 2  # at least the binary, or the decimal, octal or hex digits
    return 2 * digits + (6 if precision is None else precision) + 8  # 2x: ',' and '_' grouping


def _repr_str(s: str, nested: bool) -> int:
    """An upper bound on `repr(s)` (nested in a container) or `s` itself (printed at the top)."""
    if not nested:
        return len(s)
    if s.isascii() and s.isprintable():  # only backslashes and, when both kinds are in it, quotes are escaped
        return len(s) + 2 + s.count("\\") + (s.count("'") if '"' in s else 0)
    if s.isascii():
        return 4 * len(s) + 2  # \xNN
    return 10 * len(s) + 2  # \U0010ffff


def _json_str(s: str) -> int:
    """An upper bound on a string's JSON in `tojson` (ensure_ascii, HTML characters as \\u003c ...)."""
    if s.isascii() and s.isprintable():
        html = s.count("<") + s.count(">") + s.count("&") + s.count("'")
        return len(s) + 5 * html + s.count('"') + s.count("\\") + 2
    return (6 if s.isascii() else 12) * len(s) + 2  # \u000a; a surrogate pair


def _children(value: Any) -> Any:
    if isinstance(value, Namespace):
        return (value._Namespace__attrs,)  # its repr prints every attribute
    if isinstance(value, Mapping):
        return (x for pair in value.items() for x in pair)
    return value


_CONTAINERS = {list, tuple, dict, set, frozenset, Namespace, type({}.keys()), type({}.values()), type({}.items())}
_LEAVES = {str, int, float, bool, type(None), bytes}


def _is_container(value: Any) -> bool:
    kind = type(value)
    if kind in _CONTAINERS:
        return True
    return kind not in _LEAVES and isinstance(value, (list, tuple, set, frozenset, Mapping, Namespace))


def _leaf(value: Any, json: bool) -> int:
    if isinstance(value, str):
        return _json_str(value) if json else _repr_str(value, True)
    if isinstance(value, (bytes, bytearray)):
        return 4 * len(value) + 3
    if value is None or isinstance(value, bool):
        return 5
    if isinstance(value, int):
        return abs(value).bit_length() // 3 + 2  # digits and a sign
    return 24 if isinstance(value, float) else _OTHER  # the longest float repr: -1.2345678901234567e-308


def measure(value: Any, limit: int, every: Callable[[], None] = _nothing, json: bool = False) -> tuple[int, int, int]:
    """(characters printed, elements, depth) of a container, its items as `repr` (or `json`) prints them.
    Stops counting past `limit` characters. Walked with a stack, not recursion: a template can nest deeply."""
    if not _is_container(value):
        return _leaf(value, json), 1, 0
    size, count, turns = 0, 0, 0
    memo: dict[int, tuple[Any, int, int, int]] = {}  # id -> (the object, kept alive; size, count, depth)
    stack: list[list[Any]] = []

    def push(container: Any) -> None:
        nonlocal size, count
        memo[id(container)] = (container, -1, 0, 0)  # in progress: meeting it again is a cycle
        stack.append([container, iter(_children(container)), size, count, 0])
        size, count = size + (2 if type(container) in (list, tuple, dict) else 16), count + 1  # dict_items(...)

    push(value)
    while stack:
        frame = stack[-1]
        turns += 1
        if turns % _EVERY == 0:
            every()
        if size > limit:
            return size, count, len(stack)
        child = next(frame[1], frame)  # the frame itself marks the end of its children
        if child is frame:
            stack.pop()
            memo[id(frame[0])] = (frame[0], size - frame[2], count - frame[3], frame[4] + 1)
            if stack:
                stack[-1][4] = max(stack[-1][4], frame[4] + 1)
            continue
        size += 2  # ', ' or ': '
        if not _is_container(child):
            size, count = size + _leaf(child, json), count + 1
            continue
        known = memo.get(id(child))
        if known is None:
            push(child)
        elif known[1] < 0:
            size += 5  # repr prints a cycle as [...]
        else:
            size, count, frame[4] = size + known[1], count + known[2], max(frame[4], known[3])
    return size, count, memo[id(value)][3]


def printed_size(value: Any, limit: int, every: Callable[[], None] = _nothing) -> int:
    """About how many characters `value` turns into when printed (an upper bound); lists count what they hold,
    since `[big] * 100000` holds one string but prints it 100 000 times."""
    if isinstance(value, str):
        return len(value)
    return measure(value, limit, every)[0]


def repr_size(value: Any, limit: int, every: Callable[[], None] = _nothing) -> int:
    return _repr_str(value, True) if isinstance(value, str) else printed_size(value, limit, every)


def tojson_size(value: Any, indent: Any, limit: int, every: Callable[[], None] = _nothing) -> int:
    """`tojson(indent=...)`: the compact JSON, plus a newline and `indent` per level before every element."""
    size, count, depth = measure(value, limit, every, json=True)
    width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    return size if indent is None else size + 2 * (count + 1) * (1 + max(0, width) * (depth + 1))


def _read(digits: str) -> int | None:
    if not digits:
        return None
    return int(digits) if len(digits) <= _DIGITS else HUGE


_PERCENT_TAIL = re.compile(r"[-+ #0]*(\*|\d*)(?:\.(\*|\d*))?[hlL]?(.?)", re.DOTALL)
_PAREN = re.compile(r"[()]")


def percent_size(fmt: str, args: Any, limit: int, every: Callable[[], None] = _nothing) -> int:
    """`fmt % args`, scanned as CPython reads it: literal text, then per conversion its width or its value,
    whichever is longer. `%(key)s` takes `args[key]`, `*` a width from the arguments."""
    positional = args if isinstance(args, tuple) else None
    taken = 0
    total, i, n, turns = 0, 0, len(fmt), 0

    def take() -> Any:
        nonlocal taken
        taken += 1
        if positional is None:
            return args
        return positional[taken - 1] if taken <= len(positional) else None

    while True:
        turns += 1
        if turns % _EVERY == 0:
            every()
        j = fmt.find("%", i)
        if j < 0 or total > limit:
            return total + n - i
        total, i, key = total + j - i, j + 1, None
        if i < n and fmt[i] == "(":  # a key may hold parentheses of its own: %(a(b))s
            depth, k = 1, i + 1
            while depth:
                m = _PAREN.search(fmt, k)
                if m is None:
                    return total  # CPython refuses: incomplete format key
                depth, k = depth + (1 if m.group() == "(" else -1), m.end()
            key, i = fmt[i + 1:k - 1], k
        m = _PERCENT_TAIL.match(fmt, i)
        assert m is not None  # every part of the pattern may be empty
        width_s, precision_s, conv = m.groups()
        i = m.end()
        if conv == "%":
            total += 1
            continue
        width = abs(w) if width_s == "*" and isinstance(w := take(), int) else _read(width_s or "")
        precision = abs(p) if precision_s == "*" and isinstance(p := take(), int) else _read(precision_s or "")
        if key is not None:
            value = args.get(key) if isinstance(args, Mapping) else None
        else:
            value = take()
        if conv == "c":
            content = 1
        elif conv in ("r", "a"):
            content = repr_size(value, limit, every)
        elif conv == "s":
            content = printed_size(value, limit, every)
            content = content if precision is None else min(content, precision)
        elif isinstance(value, (int, float)):
            content = _number(value, precision)
        else:
            content = printed_size(value, limit, every)  # CPython refuses a non-number for %d
        total += max(width or 0, content)


_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[_,]?(?:\.(\d*))?([a-zA-Z%]?)\Z", re.DOTALL)


def field_size(value: Any, spec: str, limit: int) -> int:
    """One `str.format` field: `format(value, spec)`, its width or its value, whichever is longer."""
    m = _FORMAT_SPEC.match(spec)
    if m is None:  # not the standard mini-language: str, int and float refuse it, others print as str()
        return printed_size(value, limit) + len(spec)
    width, precision = _read(m.group(1)), _read(m.group(2))
    if isinstance(value, str):
        content = len(value) if precision is None else min(len(value), precision)
    elif isinstance(value, (int, float)) and m.group(3) != "c":
        content = _number(value, precision, binary=m.group(3) == "b")
    else:
        content = 1 if m.group(3) == "c" else printed_size(value, limit)
    return max(width or 0, content)


def format_floor(fmt: str, every: Callable[[], None] = _nothing) -> int:
    """The least `fmt.format(...)` makes whatever its arguments: its literal text and the widths written in its
    fields (a width taken from the arguments, '{:{}}', counts as none: the formatter checks it field by field)."""
    total = 0
    for turns, (literal, field, spec, _conversion) in enumerate(string.Formatter().parse(fmt), 1):
        if turns % _EVERY == 0:
            every()
        total += len(literal)
        if field is not None and spec and "{" not in spec and (m := _FORMAT_SPEC.match(spec)) is not None:
            total += _read(m.group(1)) or 0
    return total


def expandtabs_size(s: str | bytes, tabsize: Any = 8) -> int:
    if not isinstance(tabsize, int):
        return len(s)  # CPython refuses it
    tabs = s.count("\t") if isinstance(s, str) else s.count(b"\t")
    return len(s) + tabs * max(0, tabsize - 1)


def translate_size(s: str, table: Any) -> int:
    """`s.translate(table)`: each character becomes at most the table's longest value."""
    if isinstance(table, str):
        return len(s)
    if not isinstance(table, (Mapping, list, tuple)):
        raise SecurityError("str.translate takes a dict, a list or a string as its table here")
    growing = [(k, len(v)) for k, v in (table.items() if isinstance(table, Mapping) else enumerate(table))
               if isinstance(v, str) and len(v) > 1]
    if not growing:
        return len(s)
    if isinstance(table, Mapping) and len(growing) <= 256 and all(isinstance(k, int) and 0 <= k < 0x110000
                                                                   for k, _ in growing):
        return len(s) + sum(s.count(chr(k)) * (n - 1) for k, n in growing)  # only the characters that grow
    return len(s) * max(n for _, n in growing)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any = None) -> Any:
    return kwargs[name] if name in kwargs else args[i] if len(args) > i else default


SIZED_FILTERS = frozenset({"string", "safe", "trim", "striptags", "wordcount", "upper", "lower", "title",
                           "capitalize", "e", "escape", "forceescape", "urlencode", "xmlattr", "tojson", "pprint",
                           "truncate", "center", "wordwrap", "urlize"})  # the others pick, count or reorder
KEEPS_STRINGS = frozenset({"string", "safe", "trim", "striptags", "wordcount"})  # a list in them is printed whole


def filter_size(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int,
                every: Callable[[], None] = _nothing) -> int | None:
    """An upper bound on what the builtin filter `name` (one of SIZED_FILTERS) makes of `value` (its arguments
    after the value), or None where the result is no longer than a string going in."""
    if name in KEEPS_STRINGS:
        return None if isinstance(value, str) else printed_size(value, limit, every)
    if name in ("upper", "lower", "title", "capitalize"):
        return 3 * printed_size(value, limit, every)  # 'ﬃ'.upper() == 'FFI'
    if name in ("e", "escape", "forceescape"):
        if isinstance(value, str):
            return len(value) + 4 * sum(value.count(c) for c in "&<>\"'")  # '&#34;'
        return 5 * printed_size(value, limit, every)
    if name in ("urlencode", "xmlattr"):
        return 12 * printed_size(value, limit, every) + 16  # a 4-byte UTF-8 character as %F0%9F%98%80
    if name == "tojson":
        return tojson_size(value, _arg(args, kwargs, 0, "indent"), limit, every)
    if name == "pprint":
        return 2 * tojson_size(value, 1, limit, every) + 16  # a line and an indent per element, like JSON's
    if name == "truncate":
        return printed_size(value, limit, every) + len(str(_arg(args, kwargs, 2, "end", "...")))
    if name not in ("center", "wordwrap", "urlize"):
        return None  # not one of SIZED_FILTERS
    n = printed_size(value, limit, every)
    if name == "center":
        width = _arg(args, kwargs, 0, "width", 80)
        return max(n, width if isinstance(width, int) else 0)
    if name == "wordwrap":  # a break (the wrapstring) after every character, at worst
        return n + (n + 1) * len(str(_arg(args, kwargs, 2, "wrapstring") or "\n"))
    # urlize: every word a link, its text and address escaped, its attributes added
    extra = len(str(_arg(args, kwargs, 2, "target") or "")) + len(str(_arg(args, kwargs, 3, "rel") or ""))
    return 10 * n + (n // 2 + 1) * (64 + extra)
