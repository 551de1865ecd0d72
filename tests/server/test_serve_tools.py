"""Tool calling over HTTP, driven by the real `openai` and `langchain-openai` clients, with the engine scripted:
the reply text is what a Qwen-style (Hermes) model writes (the text the real Qwen templates write for a call,
as tests/core/chat/test_tool_calls.py checks), so what is checked is the server's side — the request reaching
the engine (tools, tool turns, the forced call) and the calls coming back, whole and streamed. The end-to-end
path on the real default model is in test_serve_tools_model.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

from app.engine import protocol as P
from app.engine.batch.messages import Accepted
from app_server import AppServer, StubHub, app_server

CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


@dataclass(frozen=True)
class Loaded:
    tool_format: str


@dataclass
class ScriptedHub(StubHub):
    """A Hub whose engine answers each request with the next scripted reply, in pieces of `piece` characters."""

    replies: list[str] = field(default_factory=list)
    piece: int = 5

    async def open(self, request: P.Generate) -> Any:
        self.opened.append(request)
        text = self.replies.pop(0)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        pieces = [text[i:i + self.piece] for i in range(0, len(text), self.piece)]
        for i, p in enumerate(pieces):
            queue.put_nowait(P.Token(request.request_id, p, i, 0.0))
        queue.put_nowait(P.Done(request.request_id, text, "stop", {"prompt_tokens": 10,
                                                                    "completion_tokens": len(pieces)}))
        return Accepted(request.request_id, 10), queue


@pytest.fixture
def served() -> Iterator[AppServer]:
    with app_server(ScriptedHub(loaded=Loaded("hermes"))) as s:
        yield s


def client(s: AppServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="none", max_retries=0, timeout=30)


def script(s: AppServer, *replies: str) -> ScriptedHub:
    hub = s.hub
    assert isinstance(hub, ScriptedHub)
    hub.replies[:] = list(replies)
    return hub


ASK = [{"role": "user", "content": "Weather in Paris?"}]


def test_a_call_comes_back_as_message_tool_calls(served: AppServer) -> None:
    hub = script(served, "Let me look. " + CALL_TEXT)
    r = client(served).chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"} and call.id
    sent = hub.opened[0]
    assert sent.tools == TOOLS and sent.special_text  # the markers of some families are special tokens
    assert sent.grammar is None and sent.assistant_prefix == ""  # auto: the model decides


def test_a_streamed_call_comes_as_tool_call_deltas_after_the_content(served: AppServer) -> None:
    script(served, "Let me look. " + CALL_TEXT)
    content, calls, finish = "", {}, None
    for chunk in client(served).chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS, stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                slot = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += d.id or ""
                slot["name"] += d.function.name or ""
                slot["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    assert content.strip() == "Let me look." and "<tool_call>" not in content
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [("get_weather", {"city": "Paris"})]
    assert finish == "tool_calls"


def test_plain_text_with_tools_is_plain_content(served: AppServer) -> None:
    script(served, "It is sunny in Paris.")
    r = client(served).chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS)
    assert r.choices[0].message.content == "It is sunny in Paris."
    assert not r.choices[0].message.tool_calls and r.choices[0].finish_reason == "stop"


def test_tool_choice_required_and_named_force_the_call(served: AppServer) -> None:
    hub = script(served, 'get_weather", "arguments": {"city": "Paris"}', '{"a": 1, "b": 2}')
    c = client(served)
    r = c.chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS, tool_choice="required")
    (call,) = r.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    sent = hub.opened[0]
    assert sent.assistant_prefix == '<tool_call>\n{"name": "'
    assert sent.grammar is not None and sent.grammar["kind"] == "lark"
    assert '"get_weather\\", \\"arguments\\": " %json' in sent.grammar["source"]
    r = c.chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS,
                                  tool_choice={"type": "function", "function": {"name": "add"}})
    (call,) = r.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 1, "b": 2})
    sent = hub.opened[1]
    assert sent.assistant_prefix.endswith('"add", "arguments": ')
    assert sent.grammar == {"kind": "json_schema", "source": '{"type": "object"}'}


def test_tool_choice_none_shows_no_tools_and_parses_nothing(served: AppServer) -> None:
    hub = script(served, CALL_TEXT)
    r = client(served).chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS, tool_choice="none")
    assert r.choices[0].message.content == CALL_TEXT and not r.choices[0].message.tool_calls
    assert hub.opened[0].tools is None and hub.opened[0].grammar is None and not hub.opened[0].assistant_prefix


def test_tool_turns_reach_the_engine(served: AppServer) -> None:
    hub = script(served, "It is 18 C.")
    messages = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    r = client(served).chat.completions.create(model="stub.gguf", messages=messages, tools=TOOLS)
    assert r.choices[0].message.content == "It is 18 C."
    sent = hub.opened[0].messages
    assert sent is not None
    assert sent[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    assert sent[2] == {"role": "tool", "content": "18 C", "tool_call_id": "call_1"}


@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": "x"}, "tools"), ({"tools": [{"type": "retrieval"}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools"),
    ({"tools": [TOOLS[0], TOOLS[0]]}, "tools"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "x": {"type": "string", "pattern": "(unclosed"}}}}}], "tool_choice": "required"}, "tools"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"messages": [*ASK, {"role": "tool", "content": "18 C"}]}, "messages"),
    ({"messages": [*ASK, {"role": "assistant", "tool_calls": [{"function": {}}]}]}, "messages"),
])
def test_bad_tool_requests_are_one_clear_400(served: AppServer, extra: dict, param: str) -> None:
    body = {"messages": ASK, **extra}
    status, _, raw = served.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                                    {"Content-Type": "application/json"})
    error = json.loads(raw)["error"]
    assert status == 400 and error["param"] == param and "\n" not in error["message"]
    assert served.hub.opened == []


def test_a_model_without_tool_support_is_a_400_that_says_so() -> None:
    with app_server(ScriptedHub(loaded=Loaded(""))) as s:
        with pytest.raises(openai.BadRequestError, match="no tool support"):
            client(s).chat.completions.create(model="stub.gguf", messages=ASK, tools=TOOLS)
        assert s.hub.opened == []


def test_langchain_bind_tools_round_trip(served: AppServer) -> None:
    """LangChain's agent loop: the model calls the tool, the ToolMessage goes back, the model answers."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Weather in a city."""
        return f"18 C in {city}"

    # one tool: "required" is that tool's call, its name already in the prompt; the engine samples the arguments
    hub = script(served, '{"city": "Paris"}', "It is 18 C in Paris.")
    llm = ChatOpenAI(base_url=f"http://127.0.0.1:{served.port}/v1", api_key="none", model="stub.gguf",
                     max_retries=0)
    history: list[Any] = [HumanMessage("Weather in Paris?")]
    ai = llm.bind_tools([get_weather], tool_choice="required").invoke(history)
    (call,) = ai.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}
    history += [ai, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answer = llm.bind_tools([get_weather]).invoke(history)
    assert answer.content == "It is 18 C in Paris." and not answer.tool_calls
    second = hub.opened[1].messages
    assert second is not None and second[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert second[2] == {"role": "tool", "content": "18 C in Paris", "tool_call_id": call["id"]}
