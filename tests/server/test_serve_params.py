"""What `roofline serve` takes: every field the real `openai` client can send is decided in app.server.params
(implemented, left to another module, informational, or neutral-only), anything else is a 400 naming it;
any model name is served as the loaded model unless --strict-model-names; /v1/models/{id}."""

from __future__ import annotations

import inspect
import json

import openai
import pytest
from openai.resources.chat.completions import Completions as ChatCompletions
from openai.resources.completions import Completions
from openai.resources.embeddings import Embeddings

from app.server import openai_api as api
from app.server import params
from app_server import ScriptedHub, app_server

SDK_ONLY = {"self", "extra_headers", "extra_query", "extra_body", "timeout"}  # the client's, never in a body


def sdk_fields(method: object) -> set[str]:
    return set(inspect.signature(method).parameters) - SDK_ONLY  # type: ignore[arg-type]


@pytest.mark.parametrize(("method", "endpoint"), [(ChatCompletions.create, "chat"),
                                                  (Completions.create, "completions"),
                                                  (Embeddings.create, "embeddings")])
def test_every_field_the_openai_client_sends_is_decided(method: object, endpoint: str) -> None:
    undecided = sdk_fields(method) - params.known(endpoint)
    assert not undecided, f"decide in app/server/params.py what {endpoint} does with {sorted(undecided)}"


def test_the_tables_do_not_overlap() -> None:
    for endpoint in params.IMPLEMENTED:
        kinds = [params.IMPLEMENTED[endpoint], params.ELSEWHERE[endpoint], params.INFORMATIONAL[endpoint],
                 frozenset(params.NEUTRAL[endpoint])]
        assert sum(len(k) for k in kinds) == len(params.known(endpoint)), endpoint


def error_of(body: dict, chat: bool = True) -> dict:
    base = {"messages": [{"role": "user", "content": "x"}]} if chat else {"prompt": "x"}
    try:
        api.parse_request({**base, **body}, chat, "r", ("m.gguf",))
    except api.ApiError as exc:
        return {"status": exc.status, **exc.body()["error"]}
    return {"status": 200}


@pytest.mark.parametrize(("field", "value"), [("logit_bias", {"15": 5}), ("audio", {"voice": "x"}),
                                              ("functions", [{"name": "f"}]), ("reasoning_effort", "high"),
                                              ("modalities", ["text", "audio"]), ("store", True),
                                              ("mirostat", 2), ("n_probs", 3)])
def test_a_field_not_implemented_is_a_400_naming_it(field: str, value: object) -> None:
    err = error_of({field: value})
    assert err["status"] == 400 and err["param"] == field and f"'{field}'" in err["message"]


@pytest.mark.parametrize("body", [{"logit_bias": {}}, {"store": False}, {"n": 1}, {"modalities": ["text"]},
                                  {"service_tier": "auto"}, {"user": "alice"}, {"audio": None},
                                  {"metadata": {"k": "v"}}])
def test_neutral_values_and_informational_fields_are_accepted(body: dict) -> None:
    assert error_of(body)["status"] == 200


def test_completions_fields() -> None:
    assert error_of({"best_of": 1, "suffix": ""}, chat=False)["status"] == 200
    err = error_of({"suffix": "}\n"}, chat=False)
    assert err["status"] == 400 and err["param"] == "suffix" and "/infill" in err["message"]
    assert error_of({"max_completion_tokens": 4}, chat=False)["param"] == "max_completion_tokens"


def test_any_model_name_is_served_as_the_loaded_model() -> None:
    hub = ScriptedHub(reply="Paris.")
    with app_server(hub) as srv:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="x", max_retries=0)
        for name in ("gpt-4o-mini", "gpt-3.5-turbo", "stub.gguf"):
            r = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Capital?"}])
            assert r.choices[0].message.content == "Paris." and r.model == "stub.gguf"
            assert client.models.retrieve(name).id == "stub.gguf"
        assert [m.id for m in client.models.list().data] == ["stub.gguf"]
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}],
                                           logit_bias={"42": 3})
        assert err.value.body["param"] == "logit_bias"  # type: ignore[index]
        status, _, body = srv.request("POST", "/v1/completions", json.dumps({"prompt": "x", "model": 5}).encode())
        assert status == 400 and json.loads(body)["error"]["param"] == "model"
    assert len(hub.opened) == 3  # the refused ones never reached the engine


def test_strict_model_names_refuse_other_names() -> None:
    with app_server(ScriptedHub(), strict_model_names=True) as srv:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
        assert err.value.code == "model_not_found" and "stub.gguf" in err.value.message
        assert client.chat.completions.create(model="stub.gguf", messages=[{"role": "user", "content": "x"}]).id
        assert client.models.retrieve("stub.gguf").id == "stub.gguf"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("gpt-4o-mini")
