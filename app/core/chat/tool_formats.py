"""How each model family writes a tool call, as its chat template teaches it: one `ToolFormat` per family.

A family is recognised from its template's source (the markers the template itself writes for an assistant's
`tool_calls`), the way llama.cpp's chat parser picks its format:

- hermes (Qwen 2.5/3, Hermes, many fine-tunes): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`
- llama3 (Llama 3.1-3.3): the whole reply is `{"name": ..., "parameters": {...}}` (optionally after `<|python_tag|>`)
- mistral (Mistral 7B v0.3, Nemo, Small): `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`
  (newer tokenizers: `[TOOL_CALLS]name[ARGS]{...}`)
- deepseek (R1, V3): `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```
  <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`
- harmony (gpt-oss): `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`

`head` and `sep` are what a forced call (tool_choice required or named) writes around the function's name,
before the model writes the arguments object: app/core/chat/tool_choice.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolFormat:
    name: str
    starts: tuple[str, ...]  # text that opens the tool-call part of a reply
    head: str  # a forced call: written before the function's name ...
    sep: str  # ... and between the name and the arguments object ...
    tail: str  # ... and after the arguments (the example a template without a tool list is shown)


HERMES = ToolFormat("hermes", ("<tool_call>",), '<tool_call>\n{"name": "', '", "arguments": ', "}\n</tool_call>")
LLAMA3 = ToolFormat("llama3", ("<|python_tag|>", '{"name"', '{"type"'), '{"name": "', '", "parameters": ', "}")
MISTRAL = ToolFormat("mistral", ("[TOOL_CALLS]",), '[TOOL_CALLS] [{"name": "', '", "arguments": ', "}]")
DEEPSEEK = ToolFormat("deepseek", ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"),
                      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n",
                      "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
HARMONY = ToolFormat("harmony", ("<|channel|>commentary to=", "to=functions."),
                     "<|channel|>commentary to=functions.", " <|constrain|>json<|message|>", "<|call|>")

FORMATS = {f.name: f for f in (HERMES, LLAMA3, MISTRAL, DEEPSEEK, HARMONY)}

# What a template's source writes for a call, most specific first (a Hermes template may also mention JSON).
_MARKERS = (
    ("harmony", ("to=functions.", "<|channel|>")),
    ("deepseek", ("tool▁call▁begin",)),
    ("mistral", ("[TOOL_CALLS]",)),
    ("hermes", ("<tool_call>",)),
    ("llama3", ('"parameters": ', "<|python_tag|>", "ipython")),
)


def detect(template_source: str | None) -> ToolFormat | None:
    """The family whose calls the template writes, or None when it writes none we know."""
    if not template_source:
        return None
    for name, needles in _MARKERS:
        if any(n in template_source for n in needles):
            return FORMATS[name]
    return None
