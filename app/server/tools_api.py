"""OpenAI tool calling on top of a parsed chat request: `tools`, `tool_choice`, `parallel_tool_calls`, an
assistant turn's `tool_calls` and `role: "tool"` results in; `message.tool_calls` (or streamed `tool_calls`
deltas) and finish_reason "tool_calls" out.

The tools go to the engine, which renders them through the model's own chat template; the reply is parsed back
in the family's syntax the engine reported at load (`Loaded.tool_format`: app/core/chat/tool_formats.py). A
model whose template has no tool support gets a 400 saying so, never a silent drop. `tool_choice`:
- "none": the tools are not shown to the model and nothing is parsed (earlier tool turns still render);
- "auto" (the default with tools): the model decides; a call it writes is parsed out of the reply;
- "required" / {"type": "function", "function": {"name": ...}}: forced (app/core/chat/tool_choice.py): the reply
  starts with the call's opening and the sampler's grammar (the one response_format uses) keeps it to one call of
  the tools, arguments matching the function's schema, so exactly one call comes back.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from app.core.chat import tool_calls, tool_choice
from app.core.chat.tool_calls import CallStream, ToolCall
from app.core.chat.tool_formats import FORMATS, ToolFormat
from app.server.openai_api import ApiError, ParsedRequest

MAX_TOOLS = 128
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass
class ToolPlan:
    fmt: ToolFormat
    forced: tool_choice.ForcedCall | None
    parallel: bool = True
    stream: CallStream = field(init=False)
    forced_text: str = field(init=False, default="")  # a forced call's text so far (it goes out whole)

    def __post_init__(self) -> None:
        self.stream = CallStream(self.fmt)

    # ------------------------------------------------------------------ whole replies
    def split(self, text: str) -> tuple[str, list[ToolCall]]:
        if self.forced is not None:
            call = tool_choice.read_forced(self.forced, text)
            return ("", [call]) if call else (self.forced.prefix + text, [])
        content, calls = tool_calls.parse(self.fmt, text)
        return content, calls if self.parallel else calls[:1]

    # ------------------------------------------------------------------ streams
    def feed(self, text: str) -> str:
        if self.forced is not None:  # the call goes out whole at the end
            self.forced_text += text
            return ""
        return self.stream.feed(text)

    def finish(self) -> tuple[str, list[ToolCall]]:
        if self.forced is not None:
            return self.split(self.forced_text)
        content, calls = self.stream.finish()
        return content, calls if self.parallel else calls[:1]


def _bad(message: str, param: str = "tools") -> ApiError:
    return ApiError(400, message, param=param)


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("tools")
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise _bad(f"'tools' must be a list of at most {MAX_TOOLS} tools.")
    out, names = [], set()
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not isinstance(fn, dict):
            raise _bad(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{...}}}}; only function tools "
                       "are supported.")
        name = fn.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise _bad(f"tools[{i}].function.name must be 1-64 letters, digits, '_', '-' or '.'.")
        if name in names:
            raise _bad(f"tools[{i}]: the function name {name!r} is given twice.")
        names.add(name)
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise _bad(f"tools[{i}].function.parameters must be a JSON Schema object.")
        if fn.get("description") is not None and not isinstance(fn.get("description"), str):
            raise _bad(f"tools[{i}].function.description must be a string.")
        clean: dict[str, Any] = {"name": name}
        for key in ("description", "parameters", "strict"):
            if fn.get(key) is not None:
                clean[key] = fn[key]
        out.append({"type": "function", "function": clean})
    return out


def _choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> tuple[str, str | None]:
    raw = body.get("tool_choice")
    if raw is None:
        return ("auto" if tools else "none"), None
    if raw in ("none", "auto", "required"):
        if raw != "none" and not tools:
            raise _bad(f"tool_choice {raw!r} needs 'tools'.", "tool_choice")
        return str(raw), None
    fn = raw.get("function") if isinstance(raw, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(raw, dict) or raw.get("type") != "function" or not isinstance(name, str):
        raise _bad("tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": "
                   "{\"name\": ...}}.", "tool_choice")
    if name not in {t["function"]["name"] for t in tools}:
        raise _bad(f"tool_choice names {name!r}, which is not among 'tools'.", "tool_choice")
    return "named", name


def _call_id(raw: Any, fmt: ToolFormat | None) -> str:
    text = str(raw)
    if fmt is not None and fmt.name == "mistral" and not (len(text) == 9 and text.isalnum()):
        return hashlib.sha256(text.encode()).hexdigest()[:9]  # Mistral's templates take 9 alphanumerics only
    return text


def _tool_fields(raw: dict[str, Any], out: dict[str, Any], i: int, fmt: ToolFormat | None) -> None:
    """The tool fields of message `i` added to its engine form `out` (role and content already there)."""
    if raw.get("role") == "tool":
        cid = raw.get("tool_call_id")
        if not isinstance(cid, str) or not cid:
            raise _bad(f"messages[{i}]: a tool message needs its 'tool_call_id'.", "messages")
        out["tool_call_id"] = _call_id(cid, fmt)
        if isinstance(raw.get("name"), str):
            out["name"] = raw["name"]
        return
    calls = raw.get("tool_calls")
    if raw.get("role") != "assistant" or not calls:
        return
    if not isinstance(calls, list):
        raise _bad(f"messages[{i}].tool_calls must be a list.", "messages")
    clean = []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(
                fn.get("arguments", ""), (str, dict)):
            raise _bad(f"messages[{i}].tool_calls[{j}] must have function.name and function.arguments.", "messages")
        clean.append({"id": _call_id(call.get("id") or f"call{i}x{j}", fmt), "type": "function",
                      "function": {"name": fn["name"], "arguments": fn.get("arguments") or "{}"}})
    out["tool_calls"] = clean
    if not out.get("content"):
        out["content"] = None  # templates tell a call-only turn by its missing content (DeepSeek's)


def apply(body: dict[str, Any], parsed: ParsedRequest, tool_format: str) -> None:
    """Add the request's tools, tool_choice and tool turns to `parsed` (its Generate and its `tool_plan`)."""
    if not parsed.chat:
        for key in ("tools", "tool_choice"):
            if body.get(key) is not None:
                raise _bad(f"'{key}' is for /v1/chat/completions.", key)
        return
    fmt = FORMATS.get(tool_format)
    tools = _tools(body)
    mode, name = _choice(body, tools)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise _bad("'parallel_tool_calls' must be true or false.", "parallel_tool_calls")
    gen = parsed.generate
    assert gen.messages is not None
    for i, (raw, out) in enumerate(zip(body["messages"], gen.messages, strict=True)):
        _tool_fields(raw, out, i, fmt)
    if mode == "none":
        return
    if fmt is None:
        raise _bad("This model's chat template has no tool support (it writes neither tools nor tool calls), so "
                   "'tools' cannot be used with it; start the server with a model whose template handles tools.")
    gen.tools = tools
    gen.special_text = True  # the markers of some families are special tokens
    forced = tool_choice.forced_call(fmt, tools, name) if mode in ("required", "named") else None
    if forced is not None:
        if gen.grammar is not None:
            raise _bad("'response_format' cannot be combined with a forced tool call (tool_choice required or "
                       "a named function): the call's own grammar decides the reply.", "tool_choice")
        spec = forced.grammar()
        problem = spec.problem()
        if problem:
            raise _bad(f"The tools' parameter schemas cannot be enforced: {problem}")
        gen.assistant_prefix = forced.prefix
        gen.grammar = spec.to_wire()
    parsed.tool_plan = ToolPlan(fmt, forced, parallel)


def rewrite_body(plan: ToolPlan, body: dict[str, Any], text: str) -> None:
    """A whole chat completion's message with its tool calls split out of the text."""
    content, calls = plan.split(text)
    choice = body["choices"][0]
    if not calls:
        choice["message"]["content"] = content  # a forced call cut short: its text, prefix included
        return
    choice["message"] = {"role": "assistant", "content": content or None,
                         "tool_calls": [c.openai() for c in calls]}
    choice["finish_reason"] = "tool_calls"


def call_deltas(calls: list[ToolCall]) -> dict[str, Any]:
    """The stream delta carrying `calls` (each whole: id, name and its complete arguments)."""
    return {"tool_calls": [c.openai(index=i) for i, c in enumerate(calls)]}
