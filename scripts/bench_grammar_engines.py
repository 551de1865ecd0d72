"""Grammar engines for structured output, side by side: llguidance and outlines-core (run it through
scripts/bench_grammar_engines; it writes docs/bench/<date>-grammar-engines.md with --out).

For two real vocabularies — Gemma 3's 262,144 tokens (the default model's GGUF header) and Qwen2's 151,936
(llama.cpp's vocab-only `models/ggml-vocab-qwen2.gguf`, from its source tree; any GGUF works with --qwen) —
and a few schemas of the kinds OpenAI's strict mode documents, it measures per engine:
  - the compile time (schema → grammar/index over the whole vocabulary),
  - the time per token of a constrained walk: computing the next-token mask and advancing by the drawn token,
    median and p95 over the walk's steps (tokens drawn at random among the allowed ones, one seed for both);
and then, per JSON Schema feature of OpenAI's strict-mode list, whether the engine compiles it AND every one
of a few random constrained walks validates against the schema (jsonschema, with format checks): an engine
that compiles a keyword but ignores it fails the second part.
Our own per-token cost with llguidance (app.core.sampling.constraint: the mask applied to a float32 logits row
of the vocabulary's size, and the grammar advanced) is measured too: it is what a decode step pays.
xgrammar is not measured: its wheel requires torch, transformers and triton (several GB), for an app whose
sampler is numpy. No model is loaded: only the vocabularies are read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.gguf.vocabulary import TOKEN_CONTROL, Vocabulary, read_vocabulary  # noqa: E402
from app.core.sampling.constraint import CONTROL_PREFIX, GrammarSpec, TokenConstraint, TokenVocab  # noqa: E402

TOKEN_BYTE = 6  # llama.cpp's LLAMA_TOKEN_TYPE_BYTE: SentencePiece's <0xNN> tokens

SCHEMAS: dict[str, dict[str, Any]] = {
    "person (flat object)": {
        "type": "object", "additionalProperties": False, "required": ["name", "age", "email", "active"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"},
                       "active": {"type": "boolean"}}},
    "math reasoning (nested array)": {  # OpenAI's structured-outputs guide example
        "type": "object", "additionalProperties": False, "required": ["steps", "final_answer"],
        "properties": {"steps": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["explanation", "output"],
            "properties": {"explanation": {"type": "string"}, "output": {"type": "string"}}}},
            "final_answer": {"type": "string"}}},
    "ui (recursive $ref, enum, anyOf)": {  # OpenAI's recursive-schema example
        "type": "object", "additionalProperties": False, "required": ["type", "label", "children"],
        "properties": {"type": {"type": "string", "enum": ["div", "button", "header", "section", "field"]},
                       "label": {"type": "string"},
                       "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#"}}}},
}

_OBJ = {"type": "object", "additionalProperties": False}
FEATURES: dict[str, dict[str, Any]] = {  # OpenAI's strict-mode list of supported keywords, one schema each
    "string/number/integer/boolean": {**_OBJ, "required": ["s", "n", "i", "b"], "properties": {
        "s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"}, "b": {"type": "boolean"}}},
    "enum": {**_OBJ, "required": ["e"], "properties": {"e": {"enum": ["red", "green", 3]}}},
    "const": {**_OBJ, "required": ["c"], "properties": {"c": {"const": "fixed"}}},
    "anyOf": {**_OBJ, "required": ["a"], "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "string",
                                                                                             "maxLength": 3}]}}},
    "nullable (type list)": {**_OBJ, "required": ["x"], "properties": {"x": {"type": ["string", "null"]}}},
    "$defs + $ref": {**_OBJ, "required": ["p"], "properties": {"p": {"$ref": "#/$defs/pt"}},
                     "$defs": {"pt": {**_OBJ, "required": ["x"], "properties": {"x": {"type": "integer"}}}}},
    "recursive $ref": {**_OBJ, "required": ["v", "next"], "properties": {
        "v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}},
    "string pattern": {**_OBJ, "required": ["p"], "properties": {"p": {"type": "string",
                                                                      "pattern": "^[A-Z]{2}-[0-9]{3}$"}}},
    "format date-time": {**_OBJ, "required": ["t"], "properties": {"t": {"type": "string", "format": "date-time"}}},
    "format date": {**_OBJ, "required": ["t"], "properties": {"t": {"type": "string", "format": "date"}}},
    "format time": {**_OBJ, "required": ["t"], "properties": {"t": {"type": "string", "format": "time"}}},
    "format email": {**_OBJ, "required": ["t"], "properties": {"t": {"type": "string", "format": "email"}}},
    "format uuid": {**_OBJ, "required": ["t"], "properties": {"t": {"type": "string", "format": "uuid"}}},
    "format ipv4": {**_OBJ, "required": ["t"], "properties": {"t": {"type": "string", "format": "ipv4"}}},
    "minimum/maximum": {**_OBJ, "required": ["n"], "properties": {"n": {"type": "integer", "minimum": 10,
                                                                        "maximum": 20}}},
    "exclusiveMinimum/Maximum": {**_OBJ, "required": ["n"], "properties": {
        "n": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}},
    "multipleOf": {**_OBJ, "required": ["n"], "properties": {"n": {"type": "integer", "multipleOf": 5}}},
    "minItems/maxItems": {**_OBJ, "required": ["a"], "properties": {"a": {"type": "array", "items": {"type": "integer"},
                                                                          "minItems": 2, "maxItems": 3}}},
    "minLength/maxLength": {**_OBJ, "required": ["s"], "properties": {"s": {"type": "string", "minLength": 2,
                                                                            "maxLength": 4}}},
    "additionalProperties: false": {**_OBJ, "required": ["a"], "properties": {"a": {"type": "integer"}}},
}


# ----------------------------------------------------------------------------------------- vocabularies
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, reversed: each printable stand-in character → its byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def token_bytes(vocab: Vocabulary) -> list[bytes]:
    """Each token's bytes from a GGUF header's token strings (SentencePiece or GPT-2 byte-level BPE); control
    tokens get CONTROL_PREFIX, as app.engine.llama.grammar_vocab marks them from llama.cpp's own pieces."""
    out = []
    decoder = _byte_decoder() if vocab.model == "gpt2" else None
    for i, raw in enumerate(vocab.tokens):
        kind = vocab.token_types[i] if i < len(vocab.token_types) else 1
        text = raw.decode("utf-8", "replace")
        if kind == TOKEN_CONTROL:
            out.append(CONTROL_PREFIX + raw)
        elif kind == TOKEN_BYTE and text.startswith("<0x") and text.endswith(">"):
            out.append(bytes([int(text[3:-1], 16)]))
        elif decoder is not None and kind == 1:
            out.append(bytes(decoder.get(ch, 0) for ch in text))
        elif decoder is not None:  # user-defined tokens are literal text in byte-level vocabularies
            out.append(raw)
        else:
            out.append(text.replace("\u2581", " ").encode("utf-8"))
    return out


# ----------------------------------------------------------------------------------------- engines
class Llguidance:
    name = "llguidance"

    def __init__(self, pieces: list[bytes], eos: int) -> None:
        import llguidance
        self.version = llguidance.__version__
        self.vocab = TokenVocab(pieces, [eos])
        self.n = len(pieces)

    def compile(self, schema: dict[str, Any]) -> Any:
        grammar = GrammarSpec.json_schema(schema).grammar()
        GrammarSpec.json_schema(schema).constraint(self.vocab)  # compiled against the vocabulary: errors here
        return grammar

    def start(self, compiled: Any) -> Any:
        return TokenConstraint(self.vocab, compiled)

    def step(self, state: Any, bits: np.ndarray) -> np.ndarray:
        state._matcher.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
        return bits

    def advance(self, state: Any, token: int) -> bool:
        return bool(state._matcher.consume_token(token))

    def finished(self, state: Any) -> bool:
        return bool(state._matcher.is_stopped())


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, pieces: list[bytes], eos: int) -> None:
        import importlib.metadata

        import outlines_core
        self.version = importlib.metadata.version("outlines_core")
        self._o = outlines_core
        mapping: dict[bytes, list[int]] = {}
        for i, p in enumerate(pieces):
            if i != eos and p and not p.startswith(CONTROL_PREFIX):
                mapping.setdefault(p, []).append(i)
        self.vocab = outlines_core.Vocabulary(eos, mapping)
        self.n = len(pieces)
        self.eos = eos

    def compile(self, schema: dict[str, Any]) -> Any:
        regex = self._o.json_schema.build_regex_from_schema(json.dumps(schema))
        return self._o.Index(regex, self.vocab)

    def start(self, compiled: Any) -> Any:
        return self._o.Guide(compiled)

    def step(self, state: Any, bits: np.ndarray) -> np.ndarray:
        state.write_mask_into(bits.ctypes.data, bits.size, 4)
        return bits

    def advance(self, state: Any, token: int) -> bool:
        state.advance(token)
        return True

    def finished(self, state: Any) -> bool:
        return bool(state.is_finished())


# ----------------------------------------------------------------------------------------- measurements
UNFINISHED = b"\0unfinished"  # a walk still inside its JSON after max_steps: neither valid nor invalid


def walk(engine: Any, state: Any, pieces: list[bytes], eos: int, seed: int, max_steps: int,
         per_step: list[float]) -> bytes | None:
    """A constrained random walk: each step's mask, a token drawn among the allowed ones (EOS as soon as it
    is allowed, short tokens preferred: a walk through 262k tokens otherwise spells long strings), advanced.
    Returns the text, None when the engine failed (no token allowed, or one refused), UNFINISHED."""
    rng = np.random.default_rng(seed)
    bits = np.zeros((engine.n + 31) // 32, dtype=np.int32)
    out: list[bytes] = []
    for _ in range(max_steps):
        t0 = time.perf_counter()
        engine.step(state, bits)
        t1 = time.perf_counter()
        allowed = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little", count=engine.n))
        if allowed.size == 0:
            return None
        if eos in allowed:
            return b"".join(out)
        short = [t for t in allowed[:4096].tolist() if len(pieces[t]) <= 2] or allowed.tolist()
        token = int(rng.choice(short if rng.random() < 0.8 else allowed))
        t2 = time.perf_counter()
        ok = engine.advance(state, token)
        per_step.append((t1 - t0) + (time.perf_counter() - t2))
        if not ok:
            return None
        out.append(pieces[token])
        if engine.finished(state):
            return b"".join(out)
    return UNFINISHED


def validator(schema: dict[str, Any]) -> Callable[[bytes], bool]:
    import jsonschema

    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

    def valid(text: bytes) -> bool:
        try:
            return not list(checker.iter_errors(json.loads(text)))
        except ValueError:
            return False
    return valid


def verdict(texts: list[bytes | None], check: Callable[[bytes], bool], features: bool = False) -> str:
    """"3/3 valid" (of the finished walks; unfinished ones said apart: a random walk may stay in a string)."""
    done = [t for t in texts if t is not UNFINISHED]
    ok = sum(t is not None and check(t) for t in done)
    unfinished = len(texts) - len(done)
    note = f" ({unfinished} unfinished)" if unfinished else ""
    if features and done and ok == len(done):
        return "yes" + note
    if features:
        return f"compiles, {ok}/{len(done)} valid{note}"
    return f"{ok}/{len(done)}{note}"


def time_schemas(engine: Any, pieces: list[bytes], eos: int, walks: int) -> list[tuple[str, ...]]:
    rows = []
    for name, schema in SCHEMAS.items():
        try:
            t0 = time.perf_counter()
            compiled = engine.compile(schema)
            compile_ms = (time.perf_counter() - t0) * 1000.0
        except Exception as exc:  # noqa: BLE001 - an engine that cannot compile it is a result, not a crash
            rows.append((name, f"fails: {str(exc).splitlines()[0][:60]}", "", "", "", ""))
            continue
        steps: list[float] = []
        check = validator(schema)
        texts = [walk(engine, engine.start(compiled), pieces, eos, seed, 400, steps) for seed in range(walks)]
        us = sorted(s * 1e6 for s in steps)
        p95 = us[int(0.95 * (len(us) - 1))] if us else 0.0
        print(f"  {engine.name}: {name}: compile {compile_ms:.0f} ms", file=sys.stderr, flush=True)
        rows.append((name, f"{compile_ms:.0f}", f"{statistics.median(us):.0f}" if us else "-",
                     f"{p95:.0f}", f"{statistics.fmean(us):.0f}" if us else "-", verdict(texts, check)))
    return rows


def feature_support(engine: Any, pieces: list[bytes], eos: int, walks: int) -> dict[str, str]:
    result = {}
    for name, schema in FEATURES.items():
        try:
            compiled = engine.compile(schema)
        except Exception as exc:  # noqa: BLE001
            result[name] = f"no ({str(exc).splitlines()[0][:40]})"
            continue
        check = validator(schema)
        texts = [walk(engine, engine.start(compiled), pieces, eos, seed, 300, []) for seed in range(walks)]
        result[name] = verdict(texts, check, features=True)
    return result


def our_cost(pieces: list[bytes], eos: int, schema: dict[str, Any], steps: int) -> tuple[float, float]:
    """app.core.sampling.constraint's per-token cost (mask a float32 row + advance), median and p95 in µs."""
    vocab = TokenVocab(pieces, [eos])
    constraint = GrammarSpec.json_schema(schema).constraint(vocab)
    row = np.random.default_rng(0).normal(size=len(pieces)).astype(np.float32)
    times = []
    for _ in range(steps):
        if constraint.done:
            constraint = GrammarSpec.json_schema(schema).constraint(vocab)
        t0 = time.perf_counter()
        masked = constraint.masked(row)
        token = int(np.argmax(masked))
        constraint.accept(token)
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def serve_cost(model: str, rounds: int) -> list[str]:
    """The grammar's cost where it is paid: `roofline serve` on `model`, one slot, the same chat request with
    and without the math-reasoning schema, `rounds` times each, interleaved; each reply's server timings."""
    import subprocess
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--parallel", "1", "--ctx", "2048", "-t", "2"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env={**__import__("os").environ, "ROOFLINE_DEFAULT_MODEL": model})
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = line.split("listening on ")[1].split()[0].removesuffix("/v1")

        def ask(body: dict[str, Any]) -> dict[str, Any]:
            req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as resp:
                return dict(json.loads(resp.read())["timings"])

        base = {"messages": [{"role": "user", "content": "Solve 3x + 5 = 20 step by step."}], "max_tokens": 96,
                "seed": 1, "ignore_eos": False}
        schema = SCHEMAS["math reasoning (nested array)"]
        fmt = {"type": "json_schema", "json_schema": {"name": "math", "schema": schema}}
        free, constrained = [], []
        for i in range(rounds):
            free.append(ask({**base, "seed": i}))
            constrained.append(ask({**base, "seed": i, "response_format": fmt}))
    finally:
        proc.terminate()
        proc.wait(30)

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.fmean(float(r.get(key, 0.0)) for r in rows)

    return [f"## The cost in `roofline serve` ({Path(model).name}, one slot, 2 threads, {rounds} rounds each)", "",
            "| request | predicted_n | decode tok/s | grammar ms/token | tok/s without the grammar's share | cost |",
            "|---|---|---|---|---|---|",
            f"| free text | {mean(free, 'predicted_n'):.0f} | {mean(free, 'predicted_per_second'):.1f} | | | |",
            f"| math-reasoning schema | {mean(constrained, 'predicted_n'):.0f} | "
            f"{mean(constrained, 'predicted_per_second'):.1f} | {mean(constrained, 'grammar_per_token_ms'):.3f} | "
            f"{mean(constrained, 'predicted_per_second_no_grammar'):.1f} | "
            f"{mean(constrained, 'grammar_decode_cost_pct'):.1f} % |", "",
            "(the schema's replies are other tokens than the free ones: compare the cost column, which each reply's "
            "own timings give, more than the two rates.)", ""]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemma", help="a GGUF with Gemma 3's vocabulary (default: the embedded default model's)")
    ap.add_argument("--qwen", help="a GGUF with Qwen2's vocabulary (llama.cpp's models/ggml-vocab-qwen2.gguf)")
    ap.add_argument("--walks", type=int, default=3, help="constrained walks per schema (default 3)")
    ap.add_argument("--out", help="write the markdown report here")
    ap.add_argument("--serve-rounds", type=int, default=0,
                    help="also measure the cost in `roofline serve` on the Gemma model, this many rounds (default 0)")
    ap.add_argument("--only-serve", action="store_true", help="only the `roofline serve` measurement")
    args = ap.parse_args(argv)
    gemma = args.gemma
    if gemma is None:
        from app.core.models.default_model import default_model_path
        gemma = str(default_model_path())
    lines = [f"# Grammar engines for structured output ({dt.date.today().isoformat()})", "",
             "scripts/bench_grammar_engines.py; " + cpu_name() + f", {platform.machine()}, "
             f"Python {platform.python_version()}. Times per token: the next-token mask plus advancing by the drawn "
             "token, over constrained random walks (µs, median and p95).", ""]
    if args.only_serve:
        text = "\n".join(lines + serve_cost(gemma, max(1, args.serve_rounds))) + "\n"
        print(text)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        return 0
    if not args.qwen:
        ap.error("--qwen is needed (a GGUF with Qwen2's vocabulary)")
    support: dict[str, dict[str, str]] = {}
    for label, path in (("Gemma 3", gemma), ("Qwen2", args.qwen)):
        v = read_vocabulary(path)
        pieces = token_bytes(v)
        eos = v.eos if v.eos is not None else 0
        lines += [f"## {label}: {len(pieces):,} tokens ({Path(path).name})", "",
                  "| engine | schema | compile ms | µs/token median | p95 | mean | finished walks valid |",
                  "|---|---|---|---|---|---|---|"]
        for cls in (Llguidance, OutlinesCore):
            t0 = time.perf_counter()
            engine = cls(pieces, eos)
            setup_ms = (time.perf_counter() - t0) * 1000.0
            for row in time_schemas(engine, pieces, eos, args.walks):
                lines.append(f"| {engine.name} {engine.version} | " + " | ".join(row) + " |")
            lines.append(f"| {engine.name} | (vocabulary set-up) | {setup_ms:.0f} | | | | |")
            if label == "Gemma 3":
                support[engine.name] = feature_support(engine, pieces, eos, args.walks)
            print(f"{label}: {engine.name} done", file=sys.stderr, flush=True)
        med, p95 = our_cost(pieces, eos, SCHEMAS["math reasoning (nested array)"], 200)
        lines += ["", f"app.core.sampling.constraint (llguidance, mask applied to a {len(pieces):,}-float row, "
                  f"then advanced), math-reasoning schema, greedy: {med:.0f} µs/token median, {p95:.0f} p95.", ""]
    names = list(support)
    lines += ["## OpenAI strict-mode features (Gemma 3 vocabulary)", "",
              "yes: compiles and every constrained walk validates against the schema (jsonschema, formats checked).",
              "", "| feature | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for feature in FEATURES:
        lines.append(f"| {feature} | " + " | ".join(support[n][feature] for n in names) + " |")
    if args.serve_rounds:
        lines += [""] + serve_cost(gemma, args.serve_rounds)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
