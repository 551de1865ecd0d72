"""The batch engine's embeddings and fill-in-the-middle on tiny synthetic models that llama.cpp really runs:
an embedding model (its GGUF declares mean pooling) gives the vectors llama-cpp-python's own `embed` gives,
one per input, normalized, in its own context while generation goes on; a generation model is refused;
an Infill prompt is laid out with the vocabulary's FIM tokens, and a vocabulary without them is refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine import protocol as P
from app.engine.batch.client import BatchEngineClient
from app.engine.batch.infill import Infill
from app.engine.batch.messages import Accepted, Embed, Embeddings
from synth_gguf import write_synthetic_gguf

FIM = {"tokenizer.ggml.fim_pre_token_id": 280, "tokenizer.ggml.fim_suf_token_id": 281,
       "tokenizer.ggml.fim_mid_token_id": 282}
TEXTS = ["hello world", "something else entirely", "hello world"]


class Engine:
    def __init__(self, model: Path) -> None:
        self.events: list[Any] = []
        self.client = BatchEngineClient(2)
        self.client.start_loaded(P.LoadConfig(model_path=str(model), n_ctx=512, n_threads=2, warmup=False),
                                 self.events.append)

    def answer(self, rid: str, kinds: tuple[type, ...], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in list(self.events):
                if isinstance(e, kinds) and getattr(e, "request_id", None) == rid:
                    return e
            time.sleep(0.02)
        raise AssertionError(f"no answer for {rid}")


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    path = write_synthetic_gguf(tmp_path_factory.mktemp("embed") / "embed.gguf", n_vocab=300,
                                extra_metadata={"llama.pooling_type": 1, **FIM})
    engine = Engine(path)
    yield engine, path
    engine.client.close()


def test_embeddings_are_llama_cpp_pythons_own_and_generation_goes_on(embedder: tuple[Engine, Path]) -> None:
    import llama_cpp

    engine, path = embedder
    engine.client.send(P.Generate("g", prompt="abc", sampling=P.Sampling(max_tokens=40, ignore_eos=True)))
    engine.client.send(Embed("e", list(TEXTS)))
    got = engine.answer("e", (Embeddings, P.Error))
    assert isinstance(got, Embeddings), got
    vectors = np.asarray(got.vectors)
    assert vectors.shape == (3, 256) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
    reference = llama_cpp.Llama(model_path=str(path), embedding=True, n_ctx=256, verbose=False)
    try:
        expected = np.asarray(reference.embed(TEXTS, normalize=True))
        tokens = [len(reference.tokenize(t.encode())) for t in TEXTS]
        by_ids = reference.tokenize(TEXTS[1].encode())
    finally:
        reference.close()
    assert np.allclose(vectors, expected, atol=1e-4) and got.prompt_tokens == sum(tokens)
    engine.client.send(Embed("ids", [list(by_ids)]))
    assert np.allclose(engine.answer("ids", (Embeddings,)).vectors[0], vectors[1], atol=1e-6)
    assert isinstance(engine.answer("g", (P.Done,)), P.Done)  # the slot kept generating meanwhile


def test_the_decode_loop_keeps_stepping_while_inputs_are_evaluated(embedder: tuple[Engine, Path]) -> None:
    engine, _ = embedder
    engine.client.send(P.Generate("g2", prompt="abc", sampling=P.Sampling(max_tokens=250, ignore_eos=True)))
    deadline = time.monotonic() + 60
    while not any(isinstance(e, P.Token) and e.request_id == "g2" for e in list(engine.events)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # ~100 times the reply's tokens, evaluated one input after another
    engine.client.send(Embed("many", ["ab" * 120] * 100))
    answer = engine.answer("many", (Embeddings, P.Error), timeout=300)
    assert isinstance(answer, Embeddings)
    done = engine.answer("g2", (P.Done,))
    # the reply ends while the embeddings are still being computed: they never held the decode loop
    assert engine.events.index(done) < engine.events.index(answer)


def test_an_input_over_a_slot_is_refused_naming_it(embedder: tuple[Engine, Path]) -> None:
    engine, _ = embedder
    engine.client.send(Embed("long", ["ok", "word " * 400]))
    err = engine.answer("long", (Embeddings, P.Error))
    assert isinstance(err, P.Error) and err.kind == "bad_request" and "input[1]" in err.message


def test_infill_is_laid_out_with_the_vocabularys_fim_tokens(embedder: tuple[Engine, Path]) -> None:
    import llama_cpp

    engine, path = embedder
    req = Infill("i", prompt="x", input_prefix="def f(", input_suffix="):\n",
                 sampling=P.Sampling(max_tokens=3, ignore_eos=True))
    engine.client.send(req)
    accepted = engine.answer("i", (Accepted, P.Error))
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        parts = sum(len(vocab.tokenize(t.encode(), add_bos=False)) for t in ("def f(", "x", "):\n"))
    finally:
        vocab.close()
    assert isinstance(accepted, Accepted) and accepted.prompt_tokens == 1 + 3 + parts  # BOS, PRE/SUF/MID
    assert engine.answer("i", (P.Done,)).finish_reason == "length"


def test_a_generation_model_cannot_embed_nor_fill_in(tmp_path: Path) -> None:
    engine = Engine(write_synthetic_gguf(tmp_path / "gen.gguf", n_vocab=300))
    try:
        engine.client.send(Embed("e", ["hello"]))
        err = engine.answer("e", (Embeddings, P.Error))
        assert isinstance(err, P.Error) and err.kind == "bad_request" and "llama.pooling_type" in err.message
        engine.client.send(Infill("i", input_prefix="a", input_suffix="b"))
        err = engine.answer("i", (Accepted, P.Error))
        assert isinstance(err, P.Error) and "fim_pre, fim_suf, fim_mid" in err.message
    finally:
        engine.client.close()
