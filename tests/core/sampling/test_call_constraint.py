"""The forced-call constraint: a name among the options, then one JSON object, then nothing — byte by byte, and
as the engine applies it to logits rows over a vocabulary of multi-byte pieces."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from app.core.chat import tool_formats
from app.core.chat.tool_choice import forced_call, read_forced
from app.core.sampling.call_constraint import CallConstraint, call_constraint, pick
from app.core.sampling.chain import Sampler, SamplerParams

VALID = ['{}', '{"a": 1}', '{"city": "Zürich", "n": -1.5e3, "ok": true, "x": null, "l": [1, [2], {}]}',
         '{"s": "a\\"b\\\\c\\u00e9\\n"}', '{"a":{"b":{"c":[false]}}}']
INVALID = ['[]', '"x"', '{"a" 1}', '{"a": 01}', '{"a": 1,}', '{,}', '{"a": tru}', '{"a": 1}}', '{"a": "\x01"}',
           '{"a": 1.}', '{"a": 1e}', '{"a": "\\x"}', '{"a":  1}', '{a: 1}']


def accepts(text: str, options: tuple[bytes, ...] = ()) -> tuple[bool, bool]:
    c = CallConstraint(options=options)
    ok = all(c.allows(bytes([b])) and c.feed(bytes([b])) for b in text.encode())
    return ok, c.done


@pytest.mark.parametrize("text", VALID)
def test_valid_objects_are_accepted_and_end_the_call(text: str) -> None:
    assert accepts(text) == (True, True)
    json.loads(text)


@pytest.mark.parametrize("text", INVALID)
def test_anything_else_is_refused(text: str) -> None:
    ok, done = accepts(text)
    assert not (ok and done)


def test_the_name_must_be_one_of_the_options() -> None:
    options = (b'get_weather", "arguments": ', b'add", "arguments": ')
    assert accepts('add", "arguments": {"a": 1}', options) == (True, True)
    assert accepts('get_time", "arguments": {}', options)[0] is False
    c = CallConstraint(options=options)
    assert c.allows(b"get_") and not c.allows(b"x") and not c.allows(b"")


def test_nothing_is_allowed_after_the_object() -> None:
    c = CallConstraint()
    assert c.feed(b'{"a": 1}') and c.done
    assert not c.allows(b" ") and not c.allows(b"\n")


def test_every_random_walk_ends_in_valid_json() -> None:
    """Whatever the model prefers, the bounds leave it a way out: each walk ends, and ends valid."""
    rng = random.Random(7)
    alphabet = [bytes([b]) for b in b'{}[]":,. -0123456789eEtruefalsn\\ab\n'] + [b"\xc3\xa9", b'"k": ', b"true"]
    for _ in range(100):
        c, out = CallConstraint(), b""
        for _step in range(5000):
            allowed = [p for p in alphabet if c.allows(p)]
            assert allowed, out  # never stuck
            piece = rng.choice(allowed)
            assert c.feed(piece)
            out += piece
            if c.done:
                break
        assert c.done, out[-80:]
        assert isinstance(json.loads(out), dict)


class Vocab:
    """A toy vocabulary as a tokenizer has: words, JSON punctuation, spaces, every printable ASCII character on
    its own (byte fallback), an EOS."""

    def __init__(self) -> None:
        words = ["{", "}", "{\"", "\":", "\": ", ", \"", "\"", " ", "  ", "\n", ",", ":", "[", "]", "city", "Paris",
                 "name", "get", "_weather", "add", "\", \"arguments\": ", "1", "23", ".5", "true", "null", "hello",
                 " world", *(chr(c) for c in range(32, 127)), "<eos>"]
        self.pieces = [w.encode() for w in words]
        self.eos = len(words) - 1

    def piece(self, t: int) -> bytes:
        return b"" if t == self.eos else self.pieces[t]


@pytest.mark.parametrize("seed", range(8))
def test_pick_on_logits_rows_writes_a_whole_call(seed: int) -> None:
    vocab = Vocab()
    rng = np.random.default_rng(seed)
    fmt = tool_formats.HERMES
    tools = [{"type": "function", "function": {"name": n}} for n in ("get_weather", "add")]
    forced = forced_call(fmt, tools, None)
    c = call_constraint(forced.to_wire())
    assert c is not None
    sampler = Sampler(SamplerParams(temperature=1.0), len(vocab.pieces), seed)
    out = b""
    for _ in range(400):
        row = rng.normal(0, 3, len(vocab.pieces)).astype(np.float32)
        row[vocab.eos] += 8  # the model would rather stop at once: the constraint does not let it
        token = pick(sampler, row, lambda t: c.allows(vocab.piece(t)))
        assert token is not None and token != vocab.eos
        c.feed(vocab.piece(token))
        out += vocab.piece(token)
        if c.done:
            break
    assert c.done
    call = read_forced(forced, out.decode())
    assert call is not None and call.name in ("get_weather", "add")
    assert isinstance(json.loads(call.arguments), dict)


def test_a_named_call_has_its_name_in_the_prefix() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "add"}}]
    forced = forced_call(tool_formats.MISTRAL, tools, "add")
    assert forced.prefix == '[TOOL_CALLS] [{"name": "add", "arguments": ' and forced.options == ()
    call = read_forced(forced, '{"a": 1}')
    assert call is not None and (call.name, call.arguments) == ("add", '{"a": 1}')
    assert read_forced(forced, '{"a": ') is None
    assert forced_call(tool_formats.HERMES, tools[:1], None).name == "get_weather"  # required with one tool
