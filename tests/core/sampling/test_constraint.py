"""app.core.sampling.constraint: a grammar's mask applied inside the sampler's chain.

A small hand-made vocabulary (every byte, a few multi-byte pieces, control tokens) and logits that prefer
what the grammar forbids: whatever the chain's settings, what the sampler draws must spell text the schema
accepts, and nothing the grammar forbids may ever be drawn."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from app.core.sampling import chain as sampling
from app.core.sampling.chain import Sampler, SamplerParams
from app.core.sampling.constraint import CONTROL_PREFIX, GrammarSpec, TokenVocab, grammar_timings

EOS = 0
TURN = 1  # a control token: no grammar text may spell it, however its bytes read
PIECES = [CONTROL_PREFIX + b"<eos>", CONTROL_PREFIX + b"<turn>"] + [bytes([i]) for i in range(256)] + [
    b'{"', b'":', b'",', b'name', b'age', b'tags', b'true', b'false', b'null', b'  ', b'xyz', b'}\n']
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
                   "ok": {"type": "boolean"}},
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def vocab() -> TokenVocab:
    return TokenVocab(PIECES, [EOS])


@pytest.fixture(params=["native", "numpy"])
def top_k_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numpy":
        monkeypatch.setattr(sampling, "native_topk", None)
    else:
        assert sampling.native_topk is not None, "the set-up did not build app.core.sampling._topk"
    return str(request.param)


def hostile_logits(rng: np.random.Generator, prose: float = 15.0) -> np.ndarray:
    """Random logits that favour garbage ('x', the control token, EOS) far above valid JSON."""
    x = rng.normal(0.0, 2.0, len(PIECES)).astype(np.float32)
    x[ord("x") + 2] += prose
    x[TURN] += 20.0
    x[EOS] += 10.0
    return x


def draw_reply(vocab: TokenVocab, params: SamplerParams, seed: int, spec: GrammarSpec,
               prose: float = 15.0) -> tuple[bytes, list[int]]:
    rng = np.random.default_rng(seed)
    constraint = spec.constraint(vocab)
    sampler = Sampler(params, len(PIECES), seed, constraint=constraint)
    drawn = []
    for _ in range(400):
        token = sampler.sample(hostile_logits(rng, prose))
        drawn.append(token)
        if token == EOS:
            break
    return b"".join(PIECES[t] for t in drawn if t != EOS), drawn


def check_schema(value: object) -> None:
    assert isinstance(value, dict) and set(value) == {"name", "age", "tags", "ok"}
    assert isinstance(value["name"], str) and len(value["name"]) <= 12
    assert isinstance(value["age"], int) and not isinstance(value["age"], bool)
    assert isinstance(value["tags"], list) and len(value["tags"]) <= 3 and set(value["tags"]) <= {"a", "b"}
    assert isinstance(value["ok"], bool)


@pytest.mark.parametrize("params", [
    SamplerParams(),  # llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
    SamplerParams(temperature=0.0),
    SamplerParams(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0),
    SamplerParams(temperature=-1.0),
    SamplerParams(repeat_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.5),
], ids=["defaults", "greedy", "hot-untruncated", "plain-draw", "penalties"])
def test_every_draw_spells_json_the_schema_accepts(vocab: TokenVocab, params: SamplerParams, top_k_path: str) -> None:
    for seed in range(3):
        text, drawn = draw_reply(vocab, params, seed, GrammarSpec.json_schema(SCHEMA))
        assert drawn[-1] == EOS, f"the grammar never let the reply end: {text!r}"
        assert TURN not in drawn
        check_schema(json.loads(text))


def test_json_object_mode_gives_an_object(vocab: TokenVocab, top_k_path: str) -> None:
    # (no preference for 'x' here: an open-ended object's string would take it for ever, as it may)
    text, drawn = draw_reply(vocab, SamplerParams(), 7, GrammarSpec.json_object(), prose=0.0)
    assert drawn[-1] == EOS
    assert isinstance(json.loads(text), dict)


def test_without_the_constraint_the_same_logits_give_garbage(vocab: TokenVocab) -> None:
    """The hostile logits really are hostile: the mask, not luck, makes the JSON above."""
    rng = np.random.default_rng(0)
    sampler = Sampler(SamplerParams(), len(PIECES), 0)
    drawn = [sampler.sample(hostile_logits(rng)) for _ in range(20)]
    assert TURN in drawn


def test_the_mask_keeps_allowed_logits_and_forbids_the_rest(vocab: TokenVocab) -> None:
    constraint = GrammarSpec.json_schema(SCHEMA).constraint(vocab)
    logits = np.arange(len(PIECES) + 5, dtype=np.float32)  # a padded row: 5 entries past the vocabulary
    out = constraint.masked(logits)
    allowed = constraint.allowed()
    assert out.shape == logits.shape
    assert np.isneginf(out[len(PIECES):]).all()
    np.testing.assert_array_equal(out[: len(PIECES)][allowed], logits[: len(PIECES)][allowed])
    assert np.isneginf(out[: len(PIECES)][~allowed]).all()
    # the schema's object starts '{"name": nothing else may come first (no EOS, no control token, no 'x')
    first = {PIECES[i] for i in np.flatnonzero(allowed)}
    assert b'{"' in first and first <= {b"{", b'{"'}
    assert constraint.accept(PIECES.index(b'{"'))
    assert not constraint.accept(ord("x") + 2)  # forbidden now: the matcher says so and stays failed
    assert constraint.done and constraint.error


def test_specs_travel_as_plain_dicts_and_bad_ones_say_why_in_one_line() -> None:
    spec = GrammarSpec.json_schema(SCHEMA)
    assert GrammarSpec.from_wire(json.loads(json.dumps(spec.to_wire()))) == spec
    assert spec.problem() is None
    assert GrammarSpec.json_object().problem() is None
    assert GrammarSpec.regex("[0-9]+").problem() is None
    for bad in (GrammarSpec("json_schema", "[1, 2]"), GrammarSpec("json_schema", "{not json"),
                GrammarSpec.json_schema({"type": "object", "properties": {"a": {"$ref": "#/missing"}}}),
                GrammarSpec.regex("(unclosed")):
        problem = bad.problem()
        assert problem and "\n" not in problem
    with pytest.raises(ValueError):
        GrammarSpec.from_wire({"kind": "yaml", "source": ""})


def test_regex_and_lark_constraints_are_enforced_too(vocab: TokenVocab) -> None:
    text, _ = draw_reply(vocab, SamplerParams(), 3, GrammarSpec.regex("(yes|no)-[0-9]{2}"))
    assert text.decode() in {f"{w}-{n:02d}" for w in ("yes", "no") for n in range(100)}
    text, _ = draw_reply(vocab, SamplerParams(), 4, GrammarSpec.lark('start: "a" ("b" | "c")+ "."'))
    assert text[:1] == b"a" and text[-1:] == b"." and set(text[1:-1].decode()) <= {"b", "c"}


def test_grammar_timings_say_what_the_mask_cost_the_decode_rate() -> None:
    # 11 tokens decoded in 100 ms: 10 decode tokens; the grammar took 2 ms a token (22 ms over 11 steps)
    fake = SimpleNamespace(mask_ms=22.0, steps=11, compile_ms=3.0)
    t = grammar_timings(fake, 11, 100.0)  # type: ignore[arg-type]
    assert t["grammar_per_token_ms"] == pytest.approx(2.0)
    assert t["predicted_per_second_no_grammar"] == pytest.approx(10 * 1000.0 / (100.0 - 20.0))
    assert t["grammar_decode_cost_pct"] == pytest.approx(100.0 * (1 - 100.0 / 125.0))
    assert grammar_timings(SimpleNamespace(mask_ms=0.0, steps=0, compile_ms=0.0), 1, 0.0)[  # type: ignore[arg-type]
        "grammar_decode_cost_pct"] == 0.0


def test_a_failed_grammar_lets_the_reply_end_and_nothing_else(vocab: TokenVocab) -> None:
    constraint = GrammarSpec.json_schema(SCHEMA).constraint(vocab)
    constraint.accept(ord("x") + 2)  # forbidden: the grammar fails
    assert constraint.error
    assert np.flatnonzero(constraint.allowed()).tolist() == [EOS]
    sampler = Sampler(SamplerParams(), len(PIECES), 0, constraint=constraint)
    assert sampler.sample(hostile_logits(np.random.default_rng(0))) == EOS


def test_the_distribution_is_the_masked_one(vocab: TokenVocab) -> None:
    constraint = GrammarSpec.json_schema(SCHEMA).constraint(vocab)
    sampler = Sampler(SamplerParams(top_k=0, top_p=1.0, min_p=0.0, temperature=1.0), len(PIECES), 0,
                      constraint=constraint)
    ids, probs = sampler.distribution(hostile_logits(np.random.default_rng(1)))
    assert set(ids.tolist()) <= set(np.flatnonzero(constraint.allowed()).tolist())
    assert probs.sum() == pytest.approx(1.0)
