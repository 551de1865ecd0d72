"""Tool calling end to end: `roofline serve` on the real default model, driven by the real `openai` and
`langchain-openai` clients.

The default model is a small base model whose own template (Gemma's) has no tool support: with it, tools are a
400 that says so. Served with a tool-capable template (Qwen 3's, tests/data/templates) it gets the tools in its
prompt, and `tool_choice` required / named holds its sampling to one call of the tools (the call's prefix in
the prompt, its grammar in the sampler): a model that follows no instruction still gives a valid call, and
LangChain's agent loop (tool call → ToolMessage → answer) goes round.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from served import KEY, Served, serve

pytestmark = pytest.mark.model

QWEN3 = Path(__file__).parents[1] / "data" / "templates" / "qwen3.jinja"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["C", "F"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {
             # bounded: a base model's integer can run on for ever (the grammar allows any number of digits)
             "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 999},
                                              "b": {"type": "integer", "minimum": 0, "maximum": 999}},
             "required": ["a", "b"], "additionalProperties": False}}}]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-tools"), "--parallel", "2", "--ctx", "4096",
               "--chat-template", str(QWEN3)) as s:
        yield s


def check_call(call: Any) -> dict[str, Any]:
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return dict(args)


def test_required_gives_one_valid_call(served: Served) -> None:
    client = served.client()
    for seed in (1, 2):
        r = client.chat.completions.create(model=served.model, messages=ASK, tools=TOOLS, tool_choice="required",
                                           max_tokens=60, seed=seed)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        (call,) = choice.message.tool_calls
        assert call.function.name in SCHEMAS
        check_call(call)


def test_a_named_call_streams_as_tool_call_deltas(served: Served) -> None:
    name, args, finish = "", "", None
    for chunk in served.client().chat.completions.create(
            model=served.model, messages=ASK, tools=TOOLS, max_tokens=60, stream=True, seed=4,
            tool_choice={"type": "function", "function": {"name": "add"}}):
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                name += d.function.name or ""
                args += d.function.arguments or ""
            finish = choice.finish_reason or finish
    assert name == "add" and finish == "tool_calls"
    jsonschema.validate(json.loads(args), SCHEMAS["add"])


def test_the_tools_are_in_the_prompt(served: Served) -> None:
    client = served.client()
    plain = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=1, temperature=0)
    with_tools = client.chat.completions.create(model=served.model, messages=ASK, tools=TOOLS, max_tokens=1,
                                                temperature=0)
    assert with_tools.usage.prompt_tokens > plain.usage.prompt_tokens + 50  # two schemas and the instructions


def test_langchain_agent_loop(served: Served) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, Field

    class City(BaseModel):
        city: str = Field(max_length=16)  # a base model's string can run on: the schema bounds it

    @tool(args_schema=City)
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"18 C and sunny in {city}"

    llm = ChatOpenAI(base_url=served.url + "/v1", api_key=KEY, model=served.model, max_retries=0, max_tokens=40,
                     temperature=0)
    history: list[Any] = [HumanMessage("What is the weather in Paris?")]
    ai = llm.bind_tools([get_weather], tool_choice="required").invoke(history)
    (call,) = ai.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"].get("city"), str)
    history += [ai, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answer = llm.bind_tools([get_weather], tool_choice="none").invoke(history)
    assert isinstance(answer.content, str) and not answer.tool_calls
    assert answer.response_metadata["finish_reason"] in ("stop", "length")


def test_a_template_without_tool_support_is_a_400(default_model: Path, tmp_path_factory: pytest.TempPathFactory
                                                  ) -> None:
    with serve(default_model, tmp_path_factory.mktemp("serve-gemma"), "--parallel", "1", "--ctx", "1024") as s:
        with pytest.raises(openai.BadRequestError, match="no tool support") as err:
            s.client().chat.completions.create(model=s.model, messages=ASK, tools=TOOLS, max_tokens=5)
        assert err.value.body["param"] == "tools"  # type: ignore[index]
        history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "18 C"}]
        with pytest.raises(openai.BadRequestError, match="no tool support"):
            s.client().chat.completions.create(model=s.model, messages=history, max_tokens=5)
        r = s.client().chat.completions.create(model=s.model, messages=ASK, max_tokens=3)  # still serving
        assert r.choices[0].finish_reason in ("stop", "length")
