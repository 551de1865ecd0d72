"""`tool_choice` required / named, forced: the prompt ends with the family's call opening and a grammar holds
sampling to the rest of one call.

`ForcedCall` is what the engine gets: the text the reply starts with (`prefix`, written into the prompt after the
generation prompt), and the grammar of what follows (`grammar()`, for the sampler's constraint engine:
app/core/sampling/constraint.py) — for a named function (or a single tool) its parameters' JSON schema, for a
choice of functions one of "NAME<sep>" followed by that function's arguments schema. The call is thus a valid
call of one of the tools, with arguments that match its schema, and the reply ends there.

`read_forced` turns the text sampled after the prefix back into the call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.core.chat.tool_calls import ToolCall, _json_at
from app.core.chat.tool_formats import ToolFormat
from app.core.sampling.constraint import GrammarSpec

OBJECT = {"type": "object"}
COMPACT = {"whitespace_flexible": False}  # llguidance's JSON option, as for response_format: no runaway whitespace


@dataclass(frozen=True)
class ForcedCall:
    prefix: str
    names: tuple[str, ...]  # the choice of functions still open after the prefix (empty: it names one)
    sep: str  # what the family writes between a name and its arguments
    json_schema: dict[str, Any]
    name: str | None = None  # the function, when tool_choice named it (or only one tool was given)

    schemas: tuple[dict[str, Any], ...] = ()  # each name's arguments schema (a choice of names)

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(n + self.sep for n in self.names)

    def grammar(self) -> GrammarSpec:
        """What the sampler must keep to after the prefix."""
        if not self.names:
            return GrammarSpec.json_schema(self.json_schema)
        rules = [f"c{i}: {json.dumps(option)} %json {json.dumps({**schema, 'x-guidance': COMPACT})}"
                 for i, (option, schema) in enumerate(zip(self.options, self.schemas, strict=True))]
        return GrammarSpec.lark("start: " + " | ".join(f"c{i}" for i in range(len(rules))) + "\n" + "\n".join(rules))


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """The function's arguments schema as the grammar enforces it: an object whose properties are the ones the
    schema names unless it says otherwise (additionalProperties defaults to false, as in llama.cpp's grammars and
    OpenAI's strict calls): JSON Schema's own default lets a model that follows no instruction invent keys
    until max_tokens."""
    params = tool["function"].get("parameters")
    if not isinstance(params, dict) or not params:
        return OBJECT
    if "properties" in params and "additionalProperties" not in params:
        return {**params, "additionalProperties": False}
    return params


def forced_call(fmt: ToolFormat, tools: list[dict[str, Any]], name: str | None) -> ForcedCall:
    """The constraint for a call of `name` (None: any of `tools`)."""
    if name is None and len(tools) == 1:
        name = tools[0]["function"]["name"]
    if name is not None:
        tool = next(t for t in tools if t["function"]["name"] == name)
        return ForcedCall(fmt.head + name + fmt.sep, (), fmt.sep, _parameters(tool), name)
    schema = {"anyOf": [{"type": "object", "properties": {"name": {"const": t["function"]["name"]},
                                                          "arguments": _parameters(t)},
                         "required": ["name", "arguments"]} for t in tools]}
    return ForcedCall(fmt.head, tuple(t["function"]["name"] for t in tools), fmt.sep, schema,
                      schemas=tuple(_parameters(t) for t in tools))


def read_forced(forced: ForcedCall, text: str) -> ToolCall | None:
    """The call in `text`, what was sampled after the prefix; None when it is not one (cut by max_tokens)."""
    name, rest = forced.name, text
    if name is None:
        name = next((n for n in forced.names if text.startswith(n + forced.sep)), None)
        if name is None:
            return None
        rest = text[len(name + forced.sep):]
    found = _json_at(rest, 0)
    if found is None or not isinstance(found[0], dict):
        return None
    return ToolCall(name, json.dumps(found[0], ensure_ascii=False))
