"""Tool calls through real models' chat templates (tests/data/templates) and back through the family's parser.

A model cannot be asked here (the test models are sparse files that follow no instruction), so the completions
are scripted, and scripted by the template itself: a conversation whose last assistant turn holds tool calls is
rendered, and the text the template writes for that turn — exactly what the model was trained to write — is the
completion the parser must read back into the same calls, whole and streamed in pieces. gpt-oss (harmony) has no
template among the test data: its completions are written out from its published format.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from app.core.chat import tool_calls, tool_formats
from app.core.chat.template_budget import end_budget, start_budget
from app.core.chat.template_tools import probe
from app.core.chat.templates import ChatTemplate, ChatTemplateError, render, tool_format
from app.core.chat.tool_calls import CallStream

DATA = Path(__file__).parents[2] / "data" / "templates"
BOS_EOS = {"llama-3.2": ("<|begin_of_text|>", "<|eot_id|>"), "qwen2.5": ("", "<|im_end|>"),
           "qwen3": ("", "<|im_end|>"), "mistral-7b-v0.3": ("<s>", "</s>"),
           "deepseek-r1-distill": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")}
FAMILY = {"llama-3.2": "llama3", "qwen2.5": "hermes", "qwen3": "hermes", "mistral-7b-v0.3": "mistral",
          "deepseek-r1-distill": "deepseek"}
# where a rendered assistant turn ends (the template's end of turn, or what it writes next)
TURN_ENDS = ("<|eot_id|>", "<|im_end|>", "</s>", "<｜tool▁outputs▁begin｜>", "<｜end▁of▁sentence｜>", "<｜Assistant｜>")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
                   "required": ["city"]}}},
         {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {
             "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]
CALLS = [("get_weather", {"city": "Zürich", "unit": "C"}), ("add", {"a": 2, "b": 3.5})]
SINGLE_CALL = {"llama-3.2"}  # its template refuses more than one call in a turn


def source(name: str) -> str:
    return (DATA / f"{name}.jinja").read_text(encoding="utf-8").removesuffix("\n")


def assistant_turn(name: str, calls: list[tuple[str, dict]]) -> str:
    """The text `name`'s template writes for an assistant turn holding `calls`: a scripted completion."""
    template = ChatTemplate("gguf", "gguf", jinja=source(name))
    bos, eos = BOS_EOS[name]
    user = [{"role": "user", "content": "Weather in Zürich, and 2 + 3.5?"}]
    turn = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call{i:05d}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}
    before = render(template, user, bos, eos, tools=TOOLS)
    after = render(template, [*user, turn], bos, eos, tools=TOOLS)
    common = next((i for i, (x, y) in enumerate(zip(before, after, strict=False)) if x != y), len(before))
    while common < len(before) and common and after[common - 1] not in ">\n":
        common -= 1  # the turns part inside a marker (DeepSeek's generation prompt opens with "<think>")
    text = after[common:]
    cut = min((i for i in (text.find(e) for e in TURN_ENDS) if i > 0), default=len(text))
    return text[:cut]


def cases() -> list[object]:
    return [pytest.param(name, n, id=f"{name}-{n}call") for name in FAMILY for n in (1, 2)
            if not (n == 2 and name in SINGLE_CALL)]


@pytest.mark.parametrize(("name", "n"), cases())
def test_the_templates_own_call_text_parses_back_into_the_calls(name: str, n: int) -> None:
    fmt = tool_formats.FORMATS[FAMILY[name]]
    assert tool_format(ChatTemplate("gguf", "gguf", jinja=source(name))) == fmt.name
    completion = assistant_turn(name, CALLS[:n])
    assert CALLS[0][0] in completion  # the template wrote the call
    content, calls = tool_calls.parse(fmt, completion)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == CALLS[:n]
    assert content.replace("<think>", "").replace("</think>", "").strip() == ""
    assert len({c.id for c in calls}) == n


@pytest.mark.parametrize(("name", "n"), cases())
def test_a_streamed_completion_gives_the_same_calls_and_no_call_text_as_content(name: str, n: int) -> None:
    fmt = tool_formats.FORMATS[FAMILY[name]]
    said = "Let me check. " if fmt.name != "llama3" else ""  # a Llama call is a whole reply
    # the engine splits thinking (Qwen 3's empty <think></think>) off the reply before the server reads it
    completion = said + re.sub(r"<think>.*?</think>\s*", "", assistant_turn(name, CALLS[:n]), flags=re.S)
    rng = random.Random(n)
    for _ in range(20):
        stream, streamed, i = CallStream(fmt), [], 0
        while i < len(completion):
            step = rng.randint(1, 6)
            streamed.append(stream.feed(completion[i:i + step]))
            i += step
        rest, calls = stream.finish()
        assert [(c.name, json.loads(c.arguments)) for c in calls] == CALLS[:n]
        assert "".join(streamed) == said  # the call's text never went out as content
        assert rest.replace("<think>", "").replace("</think>", "").strip() == ""


@pytest.mark.parametrize("name", list(FAMILY))
def test_plain_text_streams_through_untouched(name: str) -> None:
    fmt = tool_formats.FORMATS[FAMILY[name]]
    text = "It is sunny {in} Zürich, [no call] <here>; 'name': x."
    stream = CallStream(fmt)
    out = "".join(stream.feed(ch) for ch in text)
    rest, calls = stream.finish()
    assert out + rest == text and calls == []
    assert tool_calls.parse(fmt, text) == (text, [])


@pytest.mark.parametrize("name", ["qwen3", "mistral-7b-v0.3", "llama-3.2"])
def test_a_call_whose_json_is_broken_stays_content(name: str) -> None:
    fmt = tool_formats.FORMATS[FAMILY[name]]
    broken = assistant_turn(name, CALLS[:1]).replace('"city"', '"city', 1)
    assert tool_calls.parse(fmt, broken) == (broken, [])
    stream = CallStream(fmt)
    out = "".join(stream.feed(ch) for ch in broken)
    rest, calls = stream.finish()
    assert calls == [] and out + rest == broken


def test_tool_turns_render_in_each_templates_own_syntax() -> None:
    """A tool call and its result in the history, through each template: the call in the family's syntax, the
    result where the template puts results, the tools listed (or, for DeepSeek, given in a system message)."""
    history = [{"role": "user", "content": "Weather?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "abc123xyz", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "tool_call_id": "abc123xyz", "content": "18 C, sunny"}]
    wants = {"llama-3.2": '{"name": "get_weather", "parameters": {"city": "Paris"}}',
             "qwen2.5": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
             "qwen3": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
             "mistral-7b-v0.3": '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}',
             "deepseek-r1-distill": 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```'}
    for name, want in wants.items():
        bos, eos = BOS_EOS[name]
        text = render(ChatTemplate("gguf", "gguf", jinja=source(name)), history, bos, eos, tools=TOOLS)
        assert want in text, name
        assert "18 C, sunny" in text and '"The weather in a city"' in text, name
        start_budget(2.0)
        try:
            lists = probe(source(name)).lists_tools
        finally:
            end_budget()
        assert lists == (name != "deepseek-r1-distill"), name


@pytest.mark.parametrize("name", ["gemma-3", "gemma-2", "phi-4", "llama-3"])
def test_a_template_without_tool_support_says_so(name: str) -> None:
    template = ChatTemplate("gguf", "gguf", jinja=(DATA / f"{name}.jinja").read_text(encoding="utf-8"))
    assert tool_format(template) == ""
    with pytest.raises(ChatTemplateError, match="no tool support"):
        render(template, [{"role": "user", "content": "hi"}], tools=TOOLS)
    with pytest.raises(ChatTemplateError, match="no tool support"):
        render(ChatTemplate("gemma", "architecture"), [{"role": "user", "content": "hi"}], tools=TOOLS)


HARMONY = [  # gpt-oss replies, written out from the harmony format
    ("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
     'to=functions.get_weather <|constrain|>json<|message|>{"city": "Zürich", "unit": "C"}<|call|>', "", 1),
    ('<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Zürich", '
     '"unit": "C"}<|call|>', "", 1),
    ("<|channel|>final<|message|>Just text.<|return|>", "Just text.", 0),
]


@pytest.mark.parametrize(("completion", "content", "n"), HARMONY)
def test_harmony_calls(completion: str, content: str, n: int) -> None:
    fmt = tool_formats.HARMONY
    got, calls = tool_calls.parse(fmt, completion)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == CALLS[:n]
    if n:
        assert got == content
    stream = CallStream(fmt)
    out = "".join(stream.feed(completion[i:i + 3]) for i in range(0, len(completion), 3))
    rest, streamed = stream.finish()
    assert [(c.name, c.arguments) for c in streamed] == [(c.name, c.arguments) for c in calls]
    assert "to=functions" not in out
