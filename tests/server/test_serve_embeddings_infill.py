"""`roofline serve`'s /v1/embeddings and /infill over a scripted engine (app_server.ScriptedHub): the real
`openai` client's embeddings.create (base64, its default, and float), the input shapes, the 400s; the
infill request as the engine gets it and llama-server's answer shape. The engine's side (pooling, FIM
tokens) is in tests/engine/llama/test_batch_embed_infill.py."""

from __future__ import annotations

import json

import openai
import pytest

from app.engine.batch.infill import Infill
from app_server import ScriptedHub, app_server


def client(port: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)


def test_openai_client_embeds_in_base64_and_float() -> None:
    hub = ScriptedHub()
    with app_server(hub) as srv:
        c = client(srv.port)
        default = c.embeddings.create(model="text-embedding-3-small", input=["hello", "hi"])
        plain = c.embeddings.create(model="text-embedding-3-small", input="hello", encoding_format="float")
        tokens = c.embeddings.create(model="x", input=[[5, 6, 7]], encoding_format="float")
    assert [d.index for d in default.data] == [0, 1] and default.model == "stub.gguf"
    expected = [5 / 26**0.5, 0.0, 1 / 26**0.5]
    assert default.data[0].embedding == pytest.approx(expected, rel=1e-6)  # float32 through base64
    assert plain.data[0].embedding == pytest.approx(expected, rel=1e-12)  # the floats themselves
    assert default.usage.prompt_tokens == default.usage.total_tokens == 7
    assert [e.inputs for e in hub.embedded] == [["hello", "hi"], ["hello"], [[5, 6, 7]]]
    assert len(tokens.data[0].embedding) == 3


@pytest.mark.parametrize(("body", "param"), [
    ({"input": ""}, "input"), ({"input": []}, "input"), ({"input": [1, "a"]}, "input"), ({"input": 5}, "input"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format"), ({"input": "a", "dimensions": 256}, "dimensions"),
    ({"input": ["a"] * 2049}, "input"), ({"input": "a", "truncate": True}, "truncate"),
])
def test_bad_embedding_requests_are_400_naming_the_field(body: dict, param: str) -> None:
    hub = ScriptedHub()
    with app_server(hub) as srv:
        status, _, raw = srv.request("POST", "/v1/embeddings", json.dumps(body).encode())
    assert status == 400 and json.loads(raw)["error"]["param"] == param
    assert not hub.embedded


def test_a_model_that_cannot_embed_is_a_400_that_says_so() -> None:
    hub = ScriptedHub(refuse="This model cannot embed: it is a generation model, its GGUF declares no pooling")
    with app_server(hub) as srv, pytest.raises(openai.BadRequestError) as err:
        client(srv.port).embeddings.create(model="x", input="hello")
    assert "cannot embed" in err.value.message and err.value.code == "model_not_supported"


def test_infill_reaches_the_engine_laid_out_and_answers_in_llama_servers_shape() -> None:
    hub = ScriptedHub(reply="return x * 2\n", finish="stop")
    body = {"input_prefix": "def f(x):\n    ", "input_suffix": "\n", "prompt": "",
            "input_extra": [{"filename": "a.py", "text": "X = 1"}], "n_predict": 16, "temperature": 0, "top_k": 1}
    with app_server(hub) as srv:
        status, _, raw = srv.request("POST", "/infill", json.dumps(body).encode())
        s_status, headers, streamed = srv.request("POST", "/infill", json.dumps({**body, "stream": True}).encode())
    sent = hub.opened[0]
    assert isinstance(sent, Infill) and sent.input_prefix == "def f(x):\n    " and sent.input_suffix == "\n"
    assert sent.input_extra == [{"filename": "a.py", "text": "X = 1"}] and sent.sampling.max_tokens == 16
    answer = json.loads(raw)
    assert status == 200 and answer["content"] == "return x * 2\n" and answer["stop"] is True
    assert answer["stop_type"] == "eos" and answer["tokens_evaluated"] == 12 and "timings" in answer
    events = [json.loads(line[6:]) for line in streamed.decode().splitlines() if line.startswith("data: ")]
    assert s_status == 200 and headers["content-type"].startswith("text/event-stream")
    assert "".join(e["content"] for e in events) == "return x * 2\n"
    assert [e["stop"] for e in events] == [False] * (len(events) - 1) + [True]


@pytest.mark.parametrize(("body", "param"), [
    ({"input_suffix": ""}, "input_prefix"), ({"input_prefix": ""}, "input_suffix"),
    ({"input_prefix": "", "input_suffix": "", "input_extra": [{"filename": "a"}]}, "input_extra"),
    ({"input_prefix": "", "input_suffix": "", "n_predict": 0}, "n_predict"),
    ({"input_prefix": "", "input_suffix": "", "mirostat": 2}, "mirostat"),
])
def test_bad_infill_requests_are_400_naming_the_field(body: dict, param: str) -> None:
    hub = ScriptedHub()
    with app_server(hub) as srv:
        status, _, raw = srv.request("POST", "/infill", json.dumps(body).encode())
    assert status == 400 and json.loads(raw)["error"]["param"] == param and not hub.opened


def test_a_model_without_fim_tokens_is_a_400_naming_them() -> None:
    hub = ScriptedHub(refuse="This model cannot fill in the middle: its vocabulary has no fim_pre, fim_suf, "
                             "fim_mid tokens")
    with app_server(hub) as srv:
        status, _, raw = srv.request("POST", "/infill", json.dumps({"input_prefix": "a", "input_suffix": "b"}).encode())
    assert status == 400 and "fim_pre, fim_suf, fim_mid" in json.loads(raw)["error"]["message"]
