"""A reply's tool calls, read back from the text the model wrote in its family's syntax (app/core/chat/tool_formats.py).

`parse(fmt, text)` splits a whole reply into its content and its calls; `CallStream` does the same as the reply
streams: content goes out as it comes, except text that may be the start of a call (held back until it is told
apart), and everything from a call's opening marker on is kept until the reply ends, then parsed. The calls thus
go out whole, each as one OpenAI `tool_calls` delta (name and complete arguments), after the content; OpenAI
streams a call's arguments in pieces, and clients accumulate them either way.

A call whose JSON does not parse is not a call: its text stays in the content, so nothing the model wrote is
lost. Arguments are returned as JSON text (what OpenAI's `function.arguments` holds).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.core.chat.tool_formats import ToolFormat

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text of an object
    id: str = field(default_factory=lambda: new_call_id())

    def openai(self, index: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": "function",
                               "function": {"name": self.name, "arguments": self.arguments}}
        if index is not None:
            out = {"index": index, **out}
        return out


def new_call_id() -> str:
    # 9 alphanumerics: Mistral's templates refuse any other call id, OpenAI's clients take any string
    return uuid.uuid4().hex[:9]


def _json_at(text: str, i: int) -> tuple[Any, int] | None:
    """The JSON value starting at `text[i]` (after whitespace) and the index past it, or None."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    try:
        return _DECODER.raw_decode(text, i)
    except ValueError:
        return None


def _call(obj: Any, args_keys: tuple[str, ...] = ("arguments", "parameters")) -> ToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args: Any = next((obj[k] for k in args_keys if k in obj), {})
    return _with_args(obj["name"], args, obj.get("id"))


def _with_args(name: str, args: Any, call_id: Any = None) -> ToolCall | None:
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    text = json.dumps(args, ensure_ascii=False)
    return ToolCall(name, text, call_id) if isinstance(call_id, str) and call_id else ToolCall(name, text)


def _hermes(text: str) -> tuple[str, list[ToolCall]]:
    content, calls, pos = [], [], 0
    for m in re.finditer(r"<tool_call>(.*?)(?:</tool_call>|$)", text, flags=re.S):
        found = _json_at(m.group(1), 0)
        call = _call(found[0]) if found and not m.group(1)[found[1]:].strip() else None
        if call is None:
            continue
        content.append(text[pos:m.start()])
        calls.append(call)
        pos = m.end()
    content.append(text[pos:])
    return "".join(content), calls


def _llama3(text: str) -> tuple[str, list[ToolCall]]:
    body = text.lstrip()
    start = len(text) - len(body)
    if body.startswith("<|python_tag|>"):
        start += len("<|python_tag|>")
    calls, pos = [], start
    while True:
        found = _json_at(text, pos)
        call = _call(found[0]) if found else None
        if call is None or found is None:
            break
        calls.append(call)
        pos = found[1]
        rest = text[pos:].lstrip()
        if rest.startswith(";"):  # several calls: Llama 3.2 separates them with semicolons
            pos = len(text) - len(rest) + 1
    if not calls:
        return text, []
    return text[pos:].strip(), calls


def _mistral(text: str) -> tuple[str, list[ToolCall]]:
    at = text.find("[TOOL_CALLS]")
    if at < 0:
        return text, []
    rest = text[at + len("[TOOL_CALLS]"):]
    calls: list[ToolCall] = []
    found = _json_at(rest, 0)
    if found and isinstance(found[0], list):  # v0.3: a JSON list of calls
        calls = [c for c in (_call(o) for o in found[0]) if c]
        if len(calls) != len(found[0]):
            return text, []
        return text[:at] + rest[found[1]:], calls
    pos = 0  # newer tokenizers: NAME[ARGS]{...}, repeated after another [TOOL_CALLS]
    while (m := re.match(r"\s*([\w.-]+)\[ARGS\]", rest[pos:])) is not None:
        args = _json_at(rest, pos + m.end())
        call = _with_args(m.group(1), args[0]) if args else None
        if call is None or args is None:
            return text, []
        calls.append(call)
        pos = args[1]
        if rest[pos:].lstrip().startswith("[TOOL_CALLS]"):
            pos = rest.index("[TOOL_CALLS]", pos) + len("[TOOL_CALLS]")
    return (text[:at] + rest[pos:], calls) if calls else (text, [])


_DS_BEGIN, _DS_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
_DS_SEP, _DS_ALL_BEGIN, _DS_ALL_END = "<｜tool▁sep｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"


def _deepseek(text: str) -> tuple[str, list[ToolCall]]:
    first = text.find(_DS_ALL_BEGIN)
    first = text.find(_DS_BEGIN) if first < 0 else first
    if first < 0:
        return text, []
    calls = []
    for part in text[first:].split(_DS_BEGIN)[1:]:
        body = part.split(_DS_END)[0]
        if _DS_SEP not in body:
            return text, []
        left, right = body.split(_DS_SEP, 1)
        if left.strip() == "function":  # R1 / V3: function<sep>NAME\n```json\n{...}\n```
            name, _, args = right.partition("\n")
            args = args.strip().removeprefix("```json").removesuffix("```")
        else:  # V3.1: NAME<sep>{...}
            name, args = left, right
        found = _json_at(args, 0)
        call = _with_args(name.strip(), found[0]) if found else None
        if call is None:
            return text, []
        calls.append(call)
    tail = text[first:].rsplit(_DS_END, 1)[-1].replace(_DS_ALL_END, "")
    return text[:first] + tail, calls


def _harmony(text: str) -> tuple[str, list[ToolCall]]:
    calls = []
    for m in re.finditer(r"to=functions\.([\w.-]+)(.*?)<\|message\|>", text, flags=re.S):
        found = _json_at(text, m.end())
        call = _with_args(m.group(1), found[0]) if found else None
        if call is None:
            return text, []
        calls.append(call)
    if not calls:
        return text, []
    final = re.search(r"<\|channel\|>final<\|message\|>(.*?)(?:<\|end\|>|<\|return\|>|$)", text, flags=re.S)
    if final:
        return final.group(1), calls
    head = re.split(r"<\|(?:start|channel)\|>|to=functions\.", text, maxsplit=1)[0]
    return head, calls


_PARSERS = {"hermes": _hermes, "llama3": _llama3, "mistral": _mistral, "deepseek": _deepseek,
            "harmony": _harmony}


def parse(fmt: ToolFormat, text: str) -> tuple[str, list[ToolCall]]:
    """(content, calls) of a whole reply in `fmt`'s syntax; (text, []) when it holds no call that parses."""
    content, calls = _PARSERS[fmt.name](text)
    return (content.strip(), calls) if calls else (text, [])


class CallStream:
    """A streamed reply split into the content that may go out now and, at the end, its calls."""

    def __init__(self, fmt: ToolFormat) -> None:
        self.fmt = fmt
        self._held = ""  # content that may still be the start of a call
        self._calls_text: str | None = None  # from the first call's marker on
        self._sent_any = False

    def feed(self, text: str) -> str:
        """Take the next piece of the reply; returns the content that can be streamed now."""
        if self._calls_text is not None:
            self._calls_text += text
            return ""
        held = self._held + text
        at = self._marker(held)
        if at is not None:
            self._calls_text, self._held = held[at:], ""
            return self._out(held[:at])
        keep = self._could_start(held)
        self._held = held[len(held) - keep:] if keep else ""
        return self._out(held[:len(held) - keep])

    def finish(self) -> tuple[str, list[ToolCall]]:
        """The content still held back and the reply's calls."""
        if self._calls_text is None:
            rest, self._held = self._held, ""
            return rest, []
        content, calls = parse(self.fmt, self._calls_text)  # no call parsed: the whole text is content
        self._calls_text = None
        return content, calls

    def _out(self, text: str) -> str:
        if text.strip():
            self._sent_any = True
        return text

    def _marker(self, text: str) -> int | None:
        if self.fmt.name == "llama3":  # a Llama call is the whole reply: only at its start
            if self._sent_any:
                return None
            body = text.lstrip()
            return len(text) - len(body) if body.startswith(self.fmt.starts) else None
        hits = [i for i in (text.find(s) for s in self.fmt.starts) if i >= 0]
        return min(hits) if hits else None

    def _could_start(self, text: str) -> int:
        """How many characters at the end of `text` could begin a marker (they are held back)."""
        if self.fmt.name == "llama3":
            if self._sent_any:
                return 0
            body = text.lstrip()
            return len(text) if any(s.startswith(body) for s in self.fmt.starts) else 0
        for n in range(min(len(text), max(len(s) for s in self.fmt.starts) - 1), 0, -1):
            if any(s.startswith(text[-n:]) for s in self.fmt.starts):
                return n
        return 0
