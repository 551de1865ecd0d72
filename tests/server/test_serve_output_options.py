"""app.server.output_options without a model: response_format, logprobs/top_logprobs and echo are validated
into the engine's Generate (never dropped), refused in one line when wrong, and shaped back as OpenAI does."""

from __future__ import annotations

import json

import pytest

from app.core.sampling.constraint import GrammarSpec
from app.server import openai_api as api

MODELS = ("gemma.gguf",)
CHAT = {"model": "gemma.gguf", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {"model": "gemma.gguf", "prompt": "Once"}
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
          "additionalProperties": False}


def parse(body: dict, chat: bool = True) -> api.ParsedRequest:
    return api.parse_request(json.loads(json.dumps(body)), chat, "r1", MODELS)


def refusal(body: dict, chat: bool = True) -> api.ApiError:
    with pytest.raises(api.ApiError) as info:
        parse(body, chat)
    assert info.value.status == 400 and "\n" not in info.value.message
    return info.value


def test_response_format_reaches_the_engine_as_a_grammar() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "strict": True, "schema": SCHEMA}}
    for chat, base in ((True, CHAT), (False, COMPLETION)):
        g = parse({**base, "response_format": fmt}, chat).generate.grammar
        assert g is not None and GrammarSpec.from_wire(g) == GrammarSpec.json_schema(SCHEMA)
    assert parse({**CHAT, "response_format": {"type": "json_object"}}).generate.grammar == \
        GrammarSpec.json_object().to_wire()
    # llama-server's form: json_object with a schema
    g = parse({**CHAT, "response_format": {"type": "json_object", "schema": SCHEMA}}).generate.grammar
    assert g is not None and json.loads(g["source"]) == SCHEMA
    assert parse({**CHAT, "response_format": {"type": "text"}}).generate.grammar is None
    assert parse(CHAT).generate.grammar is None


@pytest.mark.parametrize("fmt, word", [
    ("json", "response_format"),
    ({"type": "yaml"}, "yaml"),
    ({"type": "json_schema"}, "json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": [1]}}, "Schema object"),
    ({"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}},
     "cannot be enforced"),
])
def test_bad_response_formats_are_one_line_400s(fmt: object, word: str) -> None:
    err = refusal({**CHAT, "response_format": fmt})
    assert word in err.message and err.param == "response_format"


def test_logprobs_fields_are_validated_and_carried() -> None:
    assert parse({**CHAT, "logprobs": True, "top_logprobs": 3}).generate.logprobs == 3
    assert parse({**CHAT, "logprobs": True}).generate.logprobs == 0
    assert parse({**CHAT, "logprobs": False}).generate.logprobs is None
    assert parse(CHAT).generate.logprobs is None
    assert parse({**COMPLETION, "logprobs": 2}, chat=False).generate.logprobs == 2
    assert parse({**COMPLETION, "logprobs": 0}, chat=False).generate.logprobs == 0
    assert refusal({**CHAT, "top_logprobs": 2}).param == "top_logprobs"  # without logprobs: true
    assert refusal({**CHAT, "logprobs": True, "top_logprobs": 21}).param == "top_logprobs"
    assert refusal({**CHAT, "logprobs": 1}).param == "logprobs"
    assert refusal({**COMPLETION, "logprobs": True}, chat=False).param == "logprobs"
    assert refusal({**COMPLETION, "echo": True, "logprobs": 1}, chat=False).param == "echo"


ENTRIES = [{"token": "Hel", "logprob": -0.5, "bytes": list(b"Hel"),
            "top_logprobs": [{"token": "Hel", "logprob": -0.5, "bytes": list(b"Hel")},
                             {"token": "Hi", "logprob": -1.5, "bytes": list(b"Hi")}]},
           {"token": "lo", "logprob": -0.1, "bytes": list(b"lo"),
            "top_logprobs": [{"token": "lo", "logprob": -0.1, "bytes": list(b"lo")}]}]


def test_logprobs_and_echo_are_shaped_as_openai_does() -> None:
    chat = parse({**CHAT, "logprobs": True, "top_logprobs": 2})
    body = api.completion_body(chat, "c", "m", "Hello", "stop", {"logprobs": ENTRIES})
    assert body["choices"][0]["logprobs"] == {"content": ENTRIES, "refusal": None}
    plain = parse({**COMPLETION, "logprobs": 2}, chat=False)
    lp = api.completion_body(plain, "c", "m", "Hello", "stop", {"logprobs": ENTRIES})["choices"][0]["logprobs"]
    assert lp == {"tokens": ["Hel", "lo"], "token_logprobs": [-0.5, -0.1],
                  "top_logprobs": [{"Hel": -0.5, "Hi": -1.5}, {"lo": -0.1}], "text_offset": [0, 3]}
    chunk = api.chunk_body(chat, "c", "m", 0, "Hel", logprobs=ENTRIES[:1])
    assert chunk["choices"][0]["logprobs"] == {"content": ENTRIES[:1], "refusal": None}
    # not asked: null, as before
    assert api.completion_body(parse(CHAT), "c", "m", "Hello", "stop", {})["choices"][0]["logprobs"] is None
    echo = parse({**COMPLETION, "echo": True}, chat=False)
    assert api.completion_body(echo, "c", "m", " upon", "stop", {})["choices"][0]["text"] == "Once upon"
    assert api.completion_body(plain, "c", "m", " upon", "stop", {})["choices"][0]["text"] == " upon"


def test_timings_carry_the_grammar_cost_only_when_there_was_a_grammar() -> None:
    metrics = {"predicted_per_second": 80.0, "grammar_decode_cost_pct": 4.0, "predicted_per_second_no_grammar": 83.3,
               "grammar_per_token_ms": 0.5}
    t = api.timings(metrics)
    assert t["grammar_decode_cost_pct"] == 4.0 and t["predicted_per_second_no_grammar"] == 83.3
    assert "grammar_decode_cost_pct" not in api.timings({"predicted_per_second": 80.0})
