"""What a chat template does with tools, probed once per template, and the messages prepared for it.

Templates differ (as llama.cpp's minja finds by probing them too): some list the `tools` variable in the prompt
(Qwen, Llama 3.x, Mistral), some only write an assistant's `tool_calls` and the tool results (the DeepSeek R1
distills), some neither (Gemma). And a call's arguments are a JSON string in OpenAI's messages, which some
templates print as they are (Qwen, DeepSeek) while others run them through `tojson` and need an object (Llama
3.x, Mistral): the probe renders both and keeps the one that prints the arguments as JSON.

A template that writes calls but not the tool list gets the list in a system message, with the call syntax of
its family (app/core/chat/tool_formats.py); one that does neither has no tool support, which `render` reports as
an error rather than dropping the tools.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from jinja2.exceptions import SecurityError, TemplateError

from app.core.chat import tool_formats
from app.core.chat.tool_formats import ToolFormat

_TOOL_NEEDLE = "tool_needle_fn"
_ARG_NEEDLE = {"needle_arg": "needle_value"}
_PROBE_TOOLS = [{"type": "function", "function": {"name": _TOOL_NEEDLE, "description": "probe",
                                                   "parameters": {"type": "object", "properties": {}}}}]
_PROBE_CHARS = 65_536


@dataclass(frozen=True)
class ToolSupport:
    fmt: ToolFormat | None  # the family whose call syntax the template writes
    lists_tools: bool  # the template writes `tools` into the prompt
    writes_calls: bool  # the template writes an assistant's tool_calls
    object_arguments: bool  # ... and wants their arguments as an object, not a JSON string

    @property
    def usable(self) -> bool:
        return self.fmt is not None and (self.lists_tools or self.writes_calls)


def _probe_calls(arguments: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Hey"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call00001", "type": "function",
                 "function": {"name": _TOOL_NEEDLE, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "call00001", "content": "tool_result_needle"}]


def _try(compiled: Any, **variables: Any) -> str:
    text = ""
    try:
        for chunk in compiled.generate(bos_token="", eos_token="", add_generation_prompt=True, **variables):
            text += chunk
            if len(text) > _PROBE_CHARS:
                break
    except SecurityError:
        raise
    except (TemplateError, TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError):
        return ""  # it refused (raise_exception) or could not handle these messages
    return text


@functools.lru_cache(maxsize=8)
def probe(source: str) -> ToolSupport:
    """How the Jinja template `source` handles tools. Call within a render budget."""
    from app.core.chat.templates import _compile, _raise_exception

    compiled = _compile(source)
    listed = _try(compiled, messages=[{"role": "user", "content": "Hey"}], tools=_PROBE_TOOLS,
                  raise_exception=_raise_exception)
    as_string = _try(compiled, messages=_probe_calls(json.dumps(_ARG_NEEDLE)), raise_exception=_raise_exception)
    as_object = _try(compiled, messages=_probe_calls(_ARG_NEEDLE), raise_exception=_raise_exception)
    printed = json.dumps(_ARG_NEEDLE)

    def writes(text: str) -> bool:
        return _TOOL_NEEDLE in text and printed in text.replace('":"', '": "')

    object_arguments = not writes(as_string) and writes(as_object)
    return ToolSupport(fmt=tool_formats.detect(source), lists_tools=_TOOL_NEEDLE in listed,
                       writes_calls=writes(as_string) or writes(as_object), object_arguments=object_arguments)


def prepare(support: ToolSupport, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
            ) -> list[dict[str, Any]]:
    """The messages as this template wants them: call arguments as an object or a string, and the tool list
    in a system message when the template does not list tools itself."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if calls:
            m = {**m, "tool_calls": [_arguments(c, support.object_arguments) for c in calls]}
        out.append(m)
    if tools and not support.lists_tools:
        out = _with_tool_system(out, tools, support.fmt)
    return out


def _arguments(call: dict[str, Any], as_object: bool) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    args = function.get("arguments", "{}")
    if as_object and isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {}
    elif not as_object and not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    function["arguments"] = args
    return {**call, "function": function}


def _with_tool_system(messages: list[dict[str, Any]], tools: list[dict[str, Any]], fmt: ToolFormat | None
                      ) -> list[dict[str, Any]]:
    listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    example = ""
    if fmt is not None:
        example = ("\n\nTo call a function, reply with exactly this (and nothing else for that call):\n"
                   f"{fmt.head}FUNCTION_NAME{fmt.sep}{{\"argument\": \"value\"}}{fmt.tail}")
    text = f"You can call these functions:\n{listing}{example}"
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]
