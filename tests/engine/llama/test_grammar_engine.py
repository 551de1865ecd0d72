"""The chat engine (the window's and `roofline chat`'s single worker) under a grammar, on the default model:
the reply validates against the schema, plain and with prompt lookup drafting, its Done says what the grammar
cost, and log-probabilities come back when asked. (The server's batch engine: tests/server/test_serve_structured.)"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from app.core.sampling.constraint import GrammarSpec
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from engine_helpers import collect, running_engine

pytestmark = pytest.mark.model

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["title", "year", "genres"],
          "properties": {"title": {"type": "string", "maxLength": 30},
                         "year": {"type": "integer", "minimum": 1900, "maximum": 2030},
                         "genres": {"type": "array", "maxItems": 3, "items": {"enum": ["drama", "comedy", "horror"]}}}}


@pytest.fixture(scope="module")
def engine(default_model: Path):
    yield from running_engine(default_model, n_threads=2)


@pytest.mark.parametrize("lookup", [False, True], ids=["plain", "prompt-lookup"])
def test_the_chat_engine_enforces_a_schema(engine: EngineClient, lookup: bool) -> None:
    req = P.Generate(request_id=engine.new_request_id("g"), prompt="A film, as JSON:", prompt_lookup=lookup,
                     sampling=P.Sampling(max_tokens=120, seed=3, repeat_penalty=1.0),
                     grammar=GrammarSpec.json_schema(SCHEMA).to_wire(), logprobs=2)
    tokens, done = collect(engine, req)
    assert done.finish_reason == "stop"
    jsonschema.validate(json.loads(done.text), SCHEMA)
    m = done.metrics
    assert m["grammar_per_token_ms"] > 0 and 0 <= m["grammar_decode_cost_pct"] < 100
    assert len(m["logprobs"]) == len(m["token_times"])
    assert all(e["logprob"] <= 0 and len(e["top_logprobs"]) == 2 for e in m["logprobs"])


def test_a_bad_grammar_is_a_bad_request(engine: EngineClient) -> None:
    req = P.Generate(request_id=engine.new_request_id("g"), prompt="x", sampling=P.Sampling(max_tokens=4),
                     grammar={"kind": "regex", "source": "(unclosed"})
    with pytest.raises(EngineError) as info:
        collect(engine, req)
    assert info.value.error.kind == "bad_request"
    assert "the grammar cannot be used: " in info.value.error.message and "(unclosed" in info.value.error.message
    # and the engine goes on serving
    _, done = collect(engine, P.Generate(request_id=engine.new_request_id("g"), prompt="x",
                                         sampling=P.Sampling(max_tokens=2)))
    assert done.metrics.get("grammar_ms") is None
