"""The endpoints beyond chat on a real `roofline serve` process: Anthropic's Messages API with the real
`anthropic` client on the default model (plain, streamed, a stop sequence), any model name, and the 400s
of a generation model on /v1/embeddings and of a vocabulary without FIM tokens on /infill; then the real
`openai` client's embeddings.create on a tiny embedding model (its GGUF declares mean pooling)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import numpy as np
import openai
import pytest

from served import KEY, Served, serve
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "2048") as s:
        yield s


def claude(served: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=served.url, api_key=KEY, max_retries=0, timeout=120)


def test_anthropic_client_plain_streamed_and_a_stop_sequence(served: Served) -> None:
    ask = {"model": "claude-sonnet-4-5", "max_tokens": 12, "system": "You answer in one sentence.",
           "messages": [{"role": "user", "content": "Describe the sea."}], "extra_body": {"temperature": 0}}
    plain = claude(served).messages.create(**ask)  # type: ignore[arg-type]
    text = plain.content[0].text  # type: ignore[union-attr]
    assert text and plain.stop_reason in ("end_turn", "max_tokens") and plain.model == served.model
    assert plain.usage.output_tokens <= 12 and plain.usage.input_tokens + plain.usage.cache_read_input_tokens > 10
    with claude(served).messages.stream(**ask) as stream:  # type: ignore[arg-type]
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text and final.stop_reason == plain.stop_reason  # greedy, alone: the same reply
    cut = text.strip()[len(text.strip()) // 2:][:2]  # a piece from the middle of the reply
    stopped = claude(served).messages.create(**ask, stop_sequences=[cut])  # type: ignore[arg-type]
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == cut
    assert stopped.content[0].text == text[:text.index(cut)]  # type: ignore[union-attr]


def test_any_model_name_and_the_400s_of_a_generation_model(served: Served) -> None:
    client = served.client()
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=3)
    assert r.model == served.model and r.usage and r.usage.completion_tokens >= 1
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="text-embedding-3-small", input="hello")
    assert "cannot embed" in err.value.message and "gemma3.pooling_type" in err.value.message
    status, raw = served.raw("POST", "/infill", json.dumps({"input_prefix": "def f(", "input_suffix": ")"}).encode())
    assert status == 400 and "fim_pre" in json.loads(raw)["error"]["message"]


def test_openai_client_embeds_with_an_embedding_model(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "tiny-embed.gguf", n_vocab=300, extra_metadata={"llama.pooling_type": 1})
    with serve(model, tmp_path / "home", "--parallel", "2", "--ctx", "1024") as s:
        got = s.client().embeddings.create(model="text-embedding-3-small", input=["a cat", "a dog", "a cat"])
    vectors = np.asarray([d.embedding for d in got.data])
    assert vectors.shape == (3, 256) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
    assert got.usage.prompt_tokens > 3
