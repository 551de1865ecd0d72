"""Constrained sampling: a grammar decides, token by token, which tokens the sampler may draw.

The grammar engine is llguidance (Microsoft's, the one llama.cpp, vLLM and SGLang can use): it compiles a JSON
schema, "any JSON object", a Lark grammar or a regex against the model's vocabulary and computes, at each step,
the bitmask of the tokens that keep the text a prefix of something the grammar accepts. It was picked over
xgrammar (needs torch) and outlines-core by measurement: docs/bench/2026-12-02-grammar-engines.md
(scripts/bench_grammar_engines.py).

The interface, also for tool calling (tool_choice "required" or a named function: hand it a JSON schema):

    from app.core.sampling.constraint import GrammarSpec
    spec = GrammarSpec.json_schema(schema)       # or .json_object(), .lark(text), .regex(pattern)
    problem = spec.problem()                     # None, or one line for an HTTP 400 (checked without a model)
    P.Generate(..., grammar=spec.to_wire())      # a plain dict: the protocol carries it as JSON

  and in an engine (app.engine.llama.grammar_vocab builds the vocabulary once per model):

    constraint = GrammarSpec.from_wire(req.grammar).constraint(vocab)   # ValueError: cannot compile
    sampler = Sampler(params, n_vocab, seed, constraint=constraint)
    # Sampler.sample masks the logits row with constraint.allowed() before its chain and hands the drawn token
    # to constraint.accept(); once the grammar is complete only end-of-generation tokens are allowed.
    constraint.mask_ms, constraint.steps         # what it cost, for the timings

`TokenVocab` wraps the vocabulary as bytes per token id (control tokens marked so that no grammar spells
them) and the end-of-generation ids; it is pure, so the tests build small ones by hand. No llama_cpp, no Qt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import llguidance
import numpy as np

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

KINDS = ("json_schema", "json_object", "lark", "regex")
CONTROL_PREFIX = b"\xff"  # llguidance's mark of a special token: no grammar text can spell it
# compact JSON: fewer tokens, and no runaway whitespace from a small model (OpenAI's strict outputs are compact too)
_JSON_OPTIONS: JsonCompileOptions = {"whitespace_flexible": False}


@dataclass(frozen=True)
class GrammarSpec:
    """What the output must match. `source` is the schema as JSON text, a Lark grammar or a regex."""

    kind: str
    source: str = ""

    @classmethod
    def json_schema(cls, schema: dict[str, Any]) -> GrammarSpec:
        return cls("json_schema", json.dumps(schema))

    @classmethod
    def json_object(cls) -> GrammarSpec:
        return cls("json_object")

    @classmethod
    def lark(cls, grammar: str) -> GrammarSpec:
        return cls("lark", grammar)

    @classmethod
    def regex(cls, pattern: str) -> GrammarSpec:
        return cls("regex", pattern)

    def to_wire(self) -> dict[str, str]:
        return {"kind": self.kind, "source": self.source}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> GrammarSpec:
        kind, source = data.get("kind"), data.get("source", "")
        if kind not in KINDS or not isinstance(source, str):
            raise ValueError(f"unknown grammar {kind!r}: expected one of {', '.join(KINDS)}")
        return cls(str(kind), source)

    def grammar(self) -> str:
        """llguidance's grammar text; ValueError for a schema that is not a JSON object."""
        if self.kind == "json_object":
            return llguidance.LLMatcher.grammar_from_json_schema({"type": "object"}, overrides=_JSON_OPTIONS)
        if self.kind == "json_schema":
            try:
                schema = json.loads(self.source)
            except ValueError as exc:
                raise ValueError(f"the schema is not valid JSON: {exc}") from None
            if not isinstance(schema, dict):
                raise ValueError("the schema must be a JSON object")
            return llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=_JSON_OPTIONS)
        if self.kind == "lark":
            return llguidance.LLMatcher.grammar_from_lark(self.source)
        if self.kind == "regex":
            return llguidance.LLMatcher.grammar_from_regex(self.source)
        raise ValueError(f"unknown grammar {self.kind!r}")

    def problem(self) -> str | None:
        """Why this grammar cannot be used (one line), or None. Needs no model: checked before a request is
        sent to the engine, so a bad schema is a 400 and not an engine error."""
        try:
            text = self.grammar()
        except ValueError as exc:
            return str(exc).splitlines()[0] if str(exc) else "the grammar is invalid"
        message = llguidance.LLMatcher.validate_grammar(text, None, limits=_limits())
        if message and not message.startswith("WARNING"):
            return message.splitlines()[0]
        return None

    def constraint(self, vocab: TokenVocab) -> TokenConstraint:
        return TokenConstraint(vocab, self.grammar())


def _limits() -> llguidance.LLParserLimits:
    """llguidance's own bounds on a grammar's size and each step's work (a hostile schema fails with a
    message instead of running for seconds), without the grammar's text in error messages."""
    return llguidance.LLParserLimits(max_grammar_size=500_000, step_max_items=50_000, max_items_in_row=2_000,
                                     verbose_errors=False)


class _Tokenizer:
    """What llguidance's TokenizerWrapper reads: the tokens as bytes, the ids, and a tokenize function."""

    def __init__(self, tokens: Sequence[bytes], eos: int, bos: int | None,
                 tokenize: Callable[[bytes], list[int]] | None) -> None:
        self.tokens = list(tokens)
        self.eos_token_id = eos
        self.bos_token_id = bos
        self.special_token_ids = [i for i, t in enumerate(self.tokens) if t.startswith(CONTROL_PREFIX)]
        self._tokenize = tokenize

    def __call__(self, text: bytes | str) -> list[int]:
        data = text.encode("utf-8") if isinstance(text, str) else text
        if self._tokenize is not None:
            return self._tokenize(data)
        return self._greedy(data)

    def _greedy(self, data: bytes) -> list[int]:  # longest match first: only used where no tokenizer is given
        by_bytes = getattr(self, "_by_bytes", None)
        if by_bytes is None:
            by_bytes = self._by_bytes = {t: i for i, t in enumerate(self.tokens) if t and t[:1] != CONTROL_PREFIX}
        longest = max((len(t) for t in by_bytes), default=1)
        out, i = [], 0
        while i < len(data):
            for n in range(min(longest, len(data) - i), 0, -1):
                tok = by_bytes.get(data[i:i + n])
                if tok is not None:
                    out.append(tok)
                    i += n
                    break
            else:
                raise ValueError(f"byte {data[i]:#x} has no token")
        return out


class TokenVocab:
    """A model's vocabulary as llguidance needs it, built once per model (~1 s for 262k tokens).

    `tokens[i]` is token i's bytes; a control token (turn markers, BOS/EOS) starts with CONTROL_PREFIX. `eog` are
    the ids that end a generation: the grammar allows them once its text is complete. `tokenize` (bytes →
    ids, the model's own tokenizer) is optional: without it llguidance falls back to a greedy match."""

    def __init__(self, tokens: Sequence[bytes], eog: Sequence[int], bos: int | None = None,
                 tokenize: Callable[[bytes], list[int]] | None = None) -> None:
        if not eog:
            raise ValueError("the vocabulary has no end-of-generation token")
        self.n_vocab = len(tokens)
        self.eog = [int(t) for t in eog]
        wrapper = llguidance.TokenizerWrapper(_Tokenizer(tokens, self.eog[0], bos, tokenize))
        self.tokenizer = llguidance.LLTokenizer(wrapper, eos_token=self.eog)


class TokenConstraint:
    """One request's grammar state: the allowed tokens now, advanced by every token drawn."""

    def __init__(self, vocab: TokenVocab, grammar: str) -> None:
        t0 = time.perf_counter()
        self.vocab = vocab
        self._matcher = llguidance.LLMatcher(vocab.tokenizer, grammar, log_level=0, limits=_limits())
        if self._matcher.is_error():
            raise ValueError(f"the grammar cannot be used: {self._matcher.get_error().splitlines()[0]}")
        self._bits = np.full((vocab.n_vocab + 31) // 32, -1, dtype=np.int32)
        self.compile_ms = (time.perf_counter() - t0) * 1000.0
        self.mask_ms = 0.0  # computing masks and applying them, and advancing the grammar: all it cost
        self.steps = 0

    def allowed(self) -> np.ndarray:
        """A bool array over the vocabulary: the tokens that may come next. A grammar in error (it cannot
        happen through the sampler, which draws only allowed tokens) allows only the end of the reply."""
        if self._matcher.is_error():
            allowed = np.zeros(self.vocab.n_vocab, dtype=bool)
            allowed[self.vocab.eog] = True
            return allowed
        self._matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little", count=self.vocab.n_vocab)
        return bits.view(bool)

    def masked(self, logits: np.ndarray) -> np.ndarray:
        """A copy of `logits` (at least n_vocab entries) where every token the grammar forbids is -inf; the
        tokens past the vocabulary (a padded logits row) are forbidden too. Counted in mask_ms."""
        t0 = time.perf_counter()
        allowed = self.allowed()
        n = self.vocab.n_vocab
        out = np.full(len(logits), -np.inf, dtype=np.float32)
        np.copyto(out[:n], logits[:n], where=allowed)
        self.mask_ms += (time.perf_counter() - t0) * 1000.0
        return out

    def accept(self, token: int) -> bool:
        """Advance the grammar by a drawn token; False when the grammar forbade it (it then stays in error)."""
        t0 = time.perf_counter()
        ok = bool(self._matcher.consume_token(int(token)))
        self.steps += 1
        self.mask_ms += (time.perf_counter() - t0) * 1000.0
        return ok

    @property
    def done(self) -> bool:
        """The grammar is complete and takes nothing more (or failed): the reply should end."""
        return bool(self._matcher.is_stopped() or self._matcher.is_error())

    @property
    def accepting(self) -> bool:
        return bool(self._matcher.is_accepting())

    @property
    def error(self) -> str | None:
        return self._matcher.get_error() if self._matcher.is_error() else None


GRAMMAR_TIMING_KEYS = ("grammar_ms", "grammar_per_token_ms", "grammar_compile_ms", "predicted_per_second_no_grammar",
                       "grammar_decode_cost_pct")


def grammar_timings(constraint: TokenConstraint, predicted_n: int, predicted_ms: float) -> dict[str, float]:
    """What a grammar cost a reply, beside llama-server's timings: its time in all (masks and grammar steps),
    per token, and the decode rate with and without it.

    The grammar's work runs in the decode loop between two steps, so the rate without it is the reply's decode
    time less the grammar's share of it (its per-token time × the decode tokens, the first token being the
    prefill's): what the same reply would have decoded at unconstrained. `grammar_decode_cost_pct` is the
    difference in percent of the unconstrained rate (a performance tool should say what a schema costs)."""
    per_token = constraint.mask_ms / constraint.steps if constraint.steps else 0.0
    decode_tokens = max(0, predicted_n - 1)
    with_rate = decode_tokens * 1000.0 / predicted_ms if predicted_ms > 0 else 0.0
    free_ms = predicted_ms - per_token * decode_tokens
    without_rate = decode_tokens * 1000.0 / free_ms if free_ms > 0 and decode_tokens else 0.0
    cost = 100.0 * (1.0 - with_rate / without_rate) if without_rate > 0 else 0.0
    values = (constraint.mask_ms, per_token, constraint.compile_ms, without_rate, cost)
    return dict(zip(GRAMMAR_TIMING_KEYS, values, strict=True))
