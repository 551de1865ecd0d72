"""A forced tool call (tool_choice required / named): its prompt prefix, and its grammar enforced by the sampler's
constraint engine on a hand-made vocabulary with logits that would rather write anything else — the text drawn
is always one call of one of the tools, with arguments that match its schema, read back by `read_forced`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.core.chat import tool_calls, tool_formats
from app.core.chat.tool_choice import forced_call, read_forced
from app.core.sampling.chain import Sampler, SamplerParams
from app.core.sampling.constraint import CONTROL_PREFIX, TokenVocab

EOS = 0
PIECES = [CONTROL_PREFIX + b"<eos>"] + [bytes([i]) for i in range(256)] + [
    b'{"', b'":', b'",', b"city", b"Paris", b"get", b"_weather", b"add", b'", "arguments": ', b"hello", b" world"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"],
             "additionalProperties": False}}},
         {"type": "function", "function": {"name": "add", "parameters": {
             "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
             "required": ["a", "b"], "additionalProperties": False}}}]


def draw(spec_vocab: TokenVocab, forced: object, seed: int) -> str:
    constraint = forced.grammar().constraint(spec_vocab)  # type: ignore[attr-defined]
    sampler = Sampler(SamplerParams(temperature=1.0), len(PIECES), seed, constraint=constraint)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(300):
        x = rng.normal(0.0, 2.0, len(PIECES)).astype(np.float32)
        x[PIECES.index(b"hello")] += 15.0  # the model would rather chat
        x[EOS] += 10.0  # ... or stop at once
        token = sampler.sample(x)
        if token == EOS:
            break
        out.append(PIECES[token])
    return b"".join(out).decode()


@pytest.fixture(scope="module")
def vocab() -> TokenVocab:
    return TokenVocab(PIECES, [EOS])


@pytest.mark.parametrize("seed", range(6))
def test_required_draws_one_call_of_a_tool_with_valid_arguments(vocab: TokenVocab, seed: int) -> None:
    forced = forced_call(tool_formats.HERMES, TOOLS, None)
    assert forced.prefix == '<tool_call>\n{"name": "'
    text = draw(vocab, forced, seed)
    call = read_forced(forced, text)
    assert call is not None, text
    args = json.loads(call.arguments)
    if call.name == "get_weather":
        assert set(args) == {"city"} and isinstance(args["city"], str) and len(args["city"]) <= 10
    else:
        assert call.name == "add" and set(args) == {"a", "b"} and all(isinstance(v, int) for v in args.values())
    # what the model saw and wrote, closed the family's way, is a call its parser reads the same
    _, parsed = tool_calls.parse(tool_formats.HERMES, forced.prefix + text + tool_formats.HERMES.tail)
    assert [(c.name, json.loads(c.arguments)) for c in parsed] == [(call.name, args)]


@pytest.mark.parametrize("fmt", list(tool_formats.FORMATS.values()), ids=lambda f: f.name)
def test_a_named_call_is_in_the_prefix_and_its_arguments_are_drawn(vocab: TokenVocab,
                                                                   fmt: tool_formats.ToolFormat) -> None:
    forced = forced_call(fmt, TOOLS, "add")
    assert forced.prefix == fmt.head + "add" + fmt.sep and forced.options == ()
    text = draw(vocab, forced, 3)
    call = read_forced(forced, text)
    assert call is not None and call.name == "add"
    assert set(json.loads(call.arguments)) == {"a", "b"}
    _, parsed = tool_calls.parse(fmt, forced.prefix + text + fmt.tail)
    assert [(c.name, c.arguments) for c in parsed] == [(call.name, call.arguments)]


def test_required_with_one_tool_is_that_tool_named() -> None:
    forced = forced_call(tool_formats.LLAMA3, TOOLS[:1], None)
    assert forced.name == "get_weather" and forced.prefix == '{"name": "get_weather", "parameters": '
    assert read_forced(forced, '{"city": "Paris"}') is not None
    assert read_forced(forced, '{"city": ') is None  # cut short (max_tokens): not a call


def test_a_forced_call_invents_no_keys_unless_the_schema_allows_them(vocab: TokenVocab) -> None:
    """JSON Schema lets any other key in by default, and a model that follows nothing writes keys until it runs
    out of tokens: a forced call keeps to the keys the schema names (as llama.cpp's grammars do)."""
    loose = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}}}}]
    forced = forced_call(tool_formats.HERMES, loose, None)
    assert forced.json_schema["additionalProperties"] is False
    for seed in range(4):
        call = read_forced(forced, draw(vocab, forced, seed))
        assert call is not None and set(json.loads(call.arguments)) <= {"city"}
    open_ended = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {}, "additionalProperties": True}}}]
    assert forced_call(tool_formats.HERMES, open_ended, None).json_schema["additionalProperties"] is True
