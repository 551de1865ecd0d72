"""`tool_choice` required / named, forced: the prompt ends with the family's call opening and sampling is held
to the rest of one call.

`ForcedCall` is the constraint handed to the engine, kept to a small interface so that any constraint engine can
enforce it: the text the reply starts with (`prefix`, written into the prompt), the name choices still open after
it (`options`, each "NAME<sep>"; empty when the function is named), and the JSON schema of what follows (the
arguments object, or for a choice of names `{"anyOf": [...]}` of whole calls). The engine's own enforcement
(app/core/sampling/call_constraint.py) is prefix forcing: the name from the options and JSON syntax; the schema is
there for a grammar engine to enforce as well.

`read_forced` turns the text sampled after the prefix back into the call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.core.chat.tool_calls import ToolCall, _json_at
from app.core.chat.tool_formats import ToolFormat

OBJECT = {"type": "object"}


@dataclass(frozen=True)
class ForcedCall:
    prefix: str
    names: tuple[str, ...]  # the choice of functions still open after the prefix (empty: it names one)
    sep: str  # what the family writes between a name and its arguments
    json_schema: dict[str, Any]
    name: str | None = None  # the function, when tool_choice named it (or only one tool was given)

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(n + self.sep for n in self.names)

    def to_wire(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "options": list(self.options), "json_schema": self.json_schema}


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    params = tool["function"].get("parameters")
    return params if isinstance(params, dict) and params else OBJECT


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
    return ForcedCall(fmt.head, tuple(t["function"]["name"] for t in tools), fmt.sep, schema)


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
