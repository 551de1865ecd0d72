"""Structured output, logprobs and echo on `roofline serve` with the real default model, through real clients:
`openai` (response_format json_schema and json_object, plain and streamed; logprobs), LangChain's
`with_structured_output`, and Simon Willison's `llm --schema` (its OpenAI-compatible model config in a temporary
LLM_USER_PATH). The default model is a 270M *base* model: it does not follow instructions, so only the grammar
can make its output JSON that validates, which is what these tests check (jsonschema, formats included)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from served import KEY, Served, open_stream, serve, sse_events

pytestmark = pytest.mark.model

PERSON = {
    "type": "object", "additionalProperties": False, "required": ["name", "age", "colour", "tags"],
    "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0,
                                                                        "maximum": 150},
                   "colour": {"enum": ["red", "green", "blue"]},
                   "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
}
ASK = [{"role": "user", "content": "Describe a person as JSON with name, age, colour and tags."}]


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "4096") as s:
        yield s


def valid(schema: dict[str, Any], text: str | None) -> Any:
    assert text, "no content"
    value = json.loads(text)
    jsonschema.validate(value, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return value


def schema_format(schema: dict[str, Any], name: str = "person") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def test_openai_json_schema_output_validates_and_its_cost_is_in_the_timings(served: Served) -> None:
    client = served.client()
    for seed in (1, 2, 3):
        r = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=200, seed=seed,
                                           response_format=schema_format(PERSON))
        assert r.choices[0].finish_reason == "stop"
        valid(PERSON, r.choices[0].message.content)
    timings = r.model_extra["timings"]
    assert timings["grammar_per_token_ms"] > 0
    assert timings["predicted_per_second_no_grammar"] >= timings["predicted_per_second"] > 0
    assert 0 <= timings["grammar_decode_cost_pct"] < 100
    free = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=20, seed=1)
    assert "grammar_per_token_ms" not in free.model_extra["timings"]


def test_without_the_grammar_the_base_model_writes_no_such_json(served: Served) -> None:
    """The model alone does not produce it: the grammar, not the prompt, makes the outputs above valid."""
    r = served.client().chat.completions.create(model=served.model, messages=ASK, max_tokens=60, seed=1)
    with pytest.raises((ValueError, jsonschema.ValidationError)):
        valid(PERSON, r.choices[0].message.content)


def test_json_object_on_completions_and_a_streamed_schema(served: Served) -> None:
    client = served.client()
    r = client.completions.create(model=served.model, prompt="The record:", max_tokens=120, seed=4,
                                  extra_body={"response_format": {"type": "json_object"}})
    if r.choices[0].finish_reason == "stop":  # an open-ended object may run to max_tokens inside a string
        assert isinstance(json.loads(r.choices[0].text), dict)
    else:
        assert r.choices[0].text.startswith("{")
    stream = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=200, seed=5, stream=True,
                                            response_format=schema_format(PERSON))
    valid(PERSON, "".join(c.choices[0].delta.content or "" for c in stream if c.choices))


def test_concurrent_requests_each_keep_their_own_schema(served: Served) -> None:
    other = {"type": "object", "additionalProperties": False, "required": ["ok", "n"],
             "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 1, "maximum": 9}}}
    client = served.client()

    def ask(schema: dict[str, Any], seed: int) -> Any:
        r = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=200, seed=seed,
                                           response_format=schema_format(schema))
        return valid(schema, r.choices[0].message.content)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ask, [PERSON, other, PERSON, other], [11, 12, 13, 14]))
    assert [set(r) for r in results] == [set(PERSON["required"]), {"ok", "n"}] * 2


def test_a_schema_that_cannot_be_enforced_is_a_400(served: Served) -> None:
    status, body = served.raw("POST", "/v1/chat/completions", json.dumps({
        "model": served.model, "messages": ASK,
        "response_format": schema_format({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}})}).encode())
    assert status == 400
    assert "response_format" in json.loads(body)["error"]["message"]


def test_langchain_with_structured_output(served: Served) -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, Field

    class Person(BaseModel):
        name: str = Field(max_length=24)
        age: int = Field(ge=0, le=150)
        likes_cats: bool

    llm = ChatOpenAI(base_url=served.url + "/v1", api_key=KEY, model=served.model, max_tokens=120, seed=7,
                     max_retries=0)
    person = llm.with_structured_output(Person, method="json_schema", strict=True).invoke(
        "Describe a person: name, age and whether they like cats.")
    assert isinstance(person, Person)
    assert 0 <= person.age <= 150 and len(person.name) <= 24


def test_llm_cli_schema(served: Served, tmp_path: Path) -> None:
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: roofline\n  model_name: {served.model}\n  api_base: {served.url}/v1\n"
        "  api_key_name: roofline\n  supports_schema: true\n", encoding="utf-8")
    (tmp_path / "keys.json").write_text(json.dumps({"roofline": KEY}), encoding="utf-8")
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "population"],
              # bounded: a base model repeats, and an unbounded integer would take "000…" up to max_tokens
              "properties": {"city": {"type": "string", "maxLength": 20},
                             "population": {"type": "integer", "minimum": 0, "maximum": 100_000_000}}}
    out = subprocess.run([sys.executable, "-m", "llm", "-m", "roofline", "--schema", json.dumps(schema), "-o",
                          "max_tokens", "120", "-o", "seed", "3", "--no-log", "A city and its population:"],
                         capture_output=True, text=True, timeout=300,
                         env={"LLM_USER_PATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    valid(schema, out.stdout)


def test_logprobs_on_chat_completions_and_streams(served: Served) -> None:
    client = served.client()
    r = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=12, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        tops = [x.logprob for x in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        # greedy, no penalties: the drawn token is the row's most likely one
        assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == pytest.approx(t.logprob)
        assert bytes(t.bytes) == t.token.encode() or "\ufffd" in t.token
    conn, resp = open_stream(served, {"model": served.model, "messages": ASK, "max_tokens": 6, "temperature": 0,
                                      "logprobs": True, "top_logprobs": 1})
    chunks = [e for e in sse_events(resp) if e != "[DONE]" and e.get("choices") and e["choices"][0]["delta"].get(
        "content") is not None and e["choices"][0]["finish_reason"] is None][1:]  # the first is the role's
    conn.close()
    assert chunks and all(len(c["choices"][0]["logprobs"]["content"]) == 1 for c in chunks)
    plain = client.chat.completions.create(model=served.model, messages=ASK, max_tokens=4, temperature=0)
    assert plain.choices[0].logprobs is None


def test_logprobs_and_echo_on_completions(served: Served) -> None:
    client = served.client()
    prompt = "The capital of France is"
    r = client.completions.create(model=served.model, prompt=prompt, max_tokens=6, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text
    assert len(lp.token_logprobs) == len(lp.tokens) == len(lp.top_logprobs) == r.usage.completion_tokens
    assert all(len(top) <= 2 and max(top.values()) <= 0 for top in lp.top_logprobs)
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    echoed = client.completions.create(model=served.model, prompt=prompt, max_tokens=6, temperature=0, echo=True)
    assert echoed.choices[0].text == prompt + r.choices[0].text
    status, body = served.raw("POST", "/v1/completions", json.dumps(
        {"model": served.model, "prompt": prompt, "echo": True, "logprobs": 1}).encode())
    assert status == 400 and "echo" in json.loads(body)["error"]["message"]
