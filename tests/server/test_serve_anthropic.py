"""`roofline serve`'s Anthropic Messages API (`POST /v1/messages`), driven by the real `anthropic` client: a
reply plain and streamed (the event sequence), the system prompt, max_tokens, stop_sequences, usage, the
key, and Anthropic-shaped 400s for what is not served. Over a scripted engine (app_server.ScriptedHub); the
real engine's side is in test_serve_anthropic_model.py."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator

import anthropic
import pytest
from anthropic.resources.messages import Messages

from app.server import params
from app_server import AppServer, ScriptedHub, app_server

KEY = "sk-anthropic-test"


def test_every_field_the_anthropic_client_sends_is_decided() -> None:
    fields = set(inspect.signature(Messages.create).parameters) - {"self", "extra_headers", "extra_query",
                                                                   "extra_body", "timeout"}
    undecided = fields - params.known("messages")
    assert not undecided, f"decide in app/server/params.py what /v1/messages does with {sorted(undecided)}"


@pytest.fixture()
def srv() -> Iterator[AppServer]:
    with app_server(ScriptedHub(reply="Hello there. Goodbye.", prompt_tokens=9), api_key=KEY) as s:
        yield s


def client(srv: AppServer, key: str = KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"http://127.0.0.1:{srv.port}", api_key=key, max_retries=0)


def test_a_message_with_system_prompt_and_usage(srv: AppServer) -> None:
    msg = client(srv).messages.create(model="claude-sonnet-4-5", max_tokens=64, system="Be brief.",
                                      messages=[{"role": "user", "content": "Hi"}])
    assert msg.type == "message" and msg.role == "assistant" and msg.model == "stub.gguf"
    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == "Hello there. Goodbye."  # type: ignore[union-attr]
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    assert msg.usage.input_tokens == 9 and msg.usage.output_tokens == 4
    sent = srv.hub.opened[-1]
    assert sent.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert sent.sampling.max_tokens == 64


def test_stop_sequences_and_content_blocks(srv: AppServer) -> None:
    msg = client(srv).messages.create(
        model="x", max_tokens=5, stop_sequences=["Goodbye"], extra_body={"temperature": 0.0, "top_k": 3},
        system=[{"type": "text", "text": "Sys "}, {"type": "text", "text": "two"}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                  {"role": "assistant", "content": "ok"}, {"role": "user", "content": "c"}])
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == "Goodbye"
    assert msg.content[0].text == "Hello there. "  # type: ignore[union-attr]
    sent = srv.hub.opened[-1]
    assert [m["content"] for m in sent.messages or []] == ["Sys two", "ab", "ok", "c"]
    assert (sent.sampling.stop, sent.sampling.temperature, sent.sampling.top_k) == (["Goodbye"], 0.0, 3)


def test_max_tokens_is_the_stop_reason_when_the_reply_is_cut() -> None:
    with app_server(ScriptedHub(finish="length")) as srv:
        msg = client(srv).messages.create(model="x", max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    assert msg.stop_reason == "max_tokens"


def test_streamed_events_in_anthropics_order(srv: AppServer) -> None:
    with client(srv).messages.stream(model="x", max_tokens=64,
                                     messages=[{"role": "user", "content": "Hi"}]) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Hello there. Goodbye." and len(texts) == 4
    assert final.content[0].text == "Hello there. Goodbye." and final.stop_reason == "end_turn"  # type: ignore[union-attr]
    assert final.usage.output_tokens == 4 and final.usage.input_tokens == 9
    raw = client(srv).messages.create(model="x", max_tokens=64, stream=True,
                                      messages=[{"role": "user", "content": "Hi"}])
    kinds = [e.type for e in raw]
    assert kinds == ["message_start", "content_block_start", *["content_block_delta"] * 4, "content_block_stop",
                     "message_delta", "message_stop"]


def test_the_key_is_required(srv: AppServer) -> None:
    with pytest.raises(anthropic.AuthenticationError):
        client(srv, key="wrong").messages.create(model="x", max_tokens=4, messages=[{"role": "user", "content": "Hi"}])


@pytest.mark.parametrize(("body", "named"), [
    ({"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t"}]}, "tools"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "image"),
    ({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, "system"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]},
     "prefill"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "temperature": 1.5}, "temperature"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "stop_sequences": "END"}, "stop_sequences"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "frobnicate": 1}, "frobnicate"),
])
def test_what_is_not_served_is_an_anthropic_400_naming_it(srv: AppServer, body: dict, named: str) -> None:
    status, _, raw = srv.request("POST", "/v1/messages", json.dumps(body).encode(),
                                 {"x-api-key": KEY, "content-type": "application/json"})
    err = json.loads(raw)
    assert status == 400 and err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert named in err["error"]["message"]
    assert not srv.hub.opened
