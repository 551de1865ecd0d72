"""The remote backend against a fake Ollama speaking its native API (tests/helpers/fake_ollama.py, written from
Ollama's api/types.go): a chat streams through /api/chat with our sampling as Ollama's options, and its reply's
metrics carry Ollama's own prefill and decode (its /v1 answers hold only `usage`); raw prompts go to
/api/generate; thinking stays apart; hostile numbers are one note each, never an exception or a stall; a cancel
ends a reply mid-stream; a look-alike without the native API gets /v1; any other server is not asked natively."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from app.core.files.untrusted import TooLarge
from app.core.remote.ollama import REPLY, REPLY_SOURCE
from app.engine import protocol as P
from app.engine.client import EngineError
from app.engine.remote.backend import SOURCE, RemoteClient
from app.engine.remote.http import json_lines
from fake_ollama import MODEL, FakeOllama
from metrics_server import FakeEngine

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]


def _chat(url: str, sampling: P.Sampling | None = None, messages: list[dict[str, Any]] | None = None) -> P.Done:
    with RemoteClient(url, api_key="k") as client:
        client.connect()
        events = list(client.generate(P.Generate(request_id="o1", messages=messages or CHAT,
                                                 sampling=sampling or P.Sampling())))
    done = events[-1]
    assert isinstance(done, P.Done)
    return done


def test_a_chat_streams_through_ollamas_native_api_with_its_own_numbers(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    sampling = P.Sampling(temperature=0.3, top_p=0.9, top_k=20, min_p=0.05, repeat_penalty=1.1, max_tokens=7,
                          seed=5, stop=["END"])
    with RemoteClient(url, api_key="k") as client:
        client.connect()
        assert client.engine == "ollama" and client.model == MODEL
        events = list(client.generate(P.Generate(request_id="o1", messages=CHAT, sampling=sampling)))
    done = events[-1]
    assert isinstance(done, P.Done) and done.text == "Hello there" and done.finish_reason == "stop"
    assert [e.text for e in events[:-1]] == ["Hello", " there"]
    path, body = st.posts[-1]
    assert path == "/api/chat" and [p for p, _ in st.posts] == ["/api/chat"]  # never /v1
    assert body["model"] == MODEL and body["stream"] is True and body["messages"] == CHAT
    assert body["options"] == {"temperature": 0.3, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "repeat_penalty": 1.1,
                               "num_predict": 7, "seed": 5, "stop": ["END"]}
    m = done.metrics
    assert m["source"] == REPLY_SOURCE
    # ollama-chat.json: 512 prompt tokens in 0.25 s; 129 reply tokens, 128 steps in 2.56 s
    assert (m["prefill_tokens"], m["prefill_ms"]) == (512, pytest.approx(250.0))
    assert m["prefill_tps"] == pytest.approx(2048.0)
    assert (m["decode_tokens"], m["decode_ms"]) == (128, pytest.approx(2560.0))
    assert m["decode_tps"] == pytest.approx(50.0)
    assert m["prompt_tokens"] == 512 and m["chunks"] == 2 and m["ttft_ms"] > 0  # TTFT stays the client's
    assert m[REPLY]["load_duration"] == 100_000_000 and m["server_notes"] == []


def test_a_raw_prompt_goes_to_api_generate_unformatted(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    with RemoteClient(url, api_key="k") as client:
        done = client.collect(P.Generate(request_id="g1", prompt="Once upon a", sampling=P.Sampling(max_tokens=3)))
    path, body = st.posts[-1]
    assert path == "/api/generate" and body["prompt"] == "Once upon a" and body["raw"] is True
    assert body["options"]["num_predict"] == 3 and "messages" not in body
    assert done.text == "Hello there" and done.metrics["source"] == REPLY_SOURCE
    assert done.metrics["prefill_tps"] == pytest.approx(2048.0)


def test_ollamas_thinking_stays_apart_from_the_answer(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.thinking = ["The user", " greets."]
    done = _chat(url)
    assert done.reasoning == "The user greets." and done.text == "Hello there"
    assert done.metrics["source"] == REPLY_SOURCE


def test_tool_calls_are_sent_as_ollamas_messages(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    call = {"id": "call1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    _chat(url, messages=[{"role": "user", "content": "1+2?"}, {"role": "assistant", "content": None,
                                                               "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call1", "content": "3"}])
    sent = st.posts[-1][1]["messages"]
    assert sent[1] == {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]}  # Ollama's arguments are an object
    assert sent[2] == {"role": "tool", "content": "3", "tool_call_id": "call1"}


NUMBERS = ('"load_duration": 100000000, "prompt_eval_count": 512, "prompt_eval_duration": 250000000, '
           '"eval_count": 129, "eval_duration": 2560000000')


@pytest.mark.parametrize(("key", "value", "note"), [
    ("prompt_eval_duration", '"250ms"', "Ollama's prompt_eval_duration (\"250ms\") is not a duration: ignored"),
    ("prompt_eval_duration", "-250000000", "Ollama's prompt_eval_duration (-250000000) is not a duration: ignored"),
    ("prompt_eval_duration", "NaN", "Ollama's prompt_eval_duration (NaN) is not a duration: ignored"),
    ("prompt_eval_duration", "1e400", "Ollama's prompt_eval_duration (Infinity) is not a duration: ignored"),
    ("prompt_eval_count", "[512]", "Ollama's prompt_eval_count ([512]) is not a token count: ignored"),
    ("prompt_eval_count", "true", "Ollama's prompt_eval_count (true) is not a token count: ignored"),
    ("prompt_eval_count", "1" + "0" * 30, "Ollama's prompt_eval_count (1e+30) is not a token count: ignored"),
    ("prompt_eval_duration", "1", "the server's prefill rate (512 tokens in 1e-09 s) is not plausible: ignored"),
])
def test_hostile_prefill_numbers_are_one_note_and_the_clients_clock(fake_ollama: tuple[str, FakeOllama],
                                                                     key: str, value: str, note: str) -> None:
    url, st = fake_ollama
    st.last = NUMBERS.replace(f'"{key}": {512 if key == "prompt_eval_count" else 250000000}', f'"{key}": {value}')
    assert value in st.last
    done = _chat(url)
    assert done.text == "Hello there" and done.finish_reason == "stop"
    assert len(done.metrics["server_notes"]) == 1 and done.metrics["server_notes"][0].startswith(note)
    assert done.metrics["source"] == SOURCE and REPLY not in done.metrics  # nothing of the server's shown


def test_a_hostile_decode_time_is_one_note_and_the_prefill_stays(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.last = NUMBERS.replace('"eval_duration": 2560000000', '"eval_duration": 1e-300')
    done = _chat(url)
    notes = done.metrics["server_notes"]
    assert len(notes) == 1 and notes[0].startswith("the server's decode rate (128 tokens in 1e-309 s) is not")
    assert done.metrics["source"] == REPLY_SOURCE and done.metrics["prefill_tps"] == pytest.approx(2048.0)
    assert done.metrics["decode_ms"] != pytest.approx(0.0)  # the client's wall clock, not 1e-300 s


def test_a_last_line_without_numbers_says_so_once(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.last = '"total_duration": 5'
    done = _chat(url)
    assert done.metrics["server_notes"] == ["Ollama's reply carried no prefill or decode numbers: only the "
                                            "client's clock"]
    assert done.metrics["source"] == SOURCE


def test_a_whole_prompt_from_the_cache_has_nothing_to_prefill(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.last = '"eval_count": 129, "eval_duration": 2560000000'  # omitempty: no prompt numbers when they are zero
    done = _chat(url)
    assert done.metrics["source"] == REPLY_SOURCE and done.metrics["server_notes"] == []
    assert done.metrics["prefill_tokens"] == 0 and done.metrics["decode_tps"] == pytest.approx(50.0)


def test_a_last_line_past_the_line_bound_ends_the_reply_in_one_error(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.last = NUMBERS + ', "padding": "' + "A" * (2 << 20) + '"'  # 2 MiB on one line: past MAX_EVENT_BYTES
    with pytest.raises(EngineError, match="sent more than a reply can hold"):
        _chat(url)


def test_an_error_line_mid_stream_is_the_servers_words(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.error_after = "model runner has unexpectedly stopped"
    with pytest.raises(EngineError, match="The server reported: model runner has unexpectedly stopped"):
        _chat(url)


def test_a_cancel_ends_a_native_reply_mid_stream(fake_ollama: tuple[str, FakeOllama]) -> None:
    """The cancel shuts the reply's socket: a read waiting on a server that holds the rest of the reply ends at
    once, not when the server goes on (60 s here) or the client's timeout (30 s) passes."""
    url, st = fake_ollama
    st.hold = True  # two lines, then the server waits before the rest
    events: list[Any] = []
    both, finished = threading.Event(), threading.Event()

    def on_event(event: Any) -> None:
        events.append(event)
        if isinstance(event, P.Token) and event.text == " there":
            both.set()
        if isinstance(event, (P.Done, P.Error)):
            finished.set()

    client = RemoteClient(url, api_key="k", on_event=on_event)
    with client:
        client.connect()
        client.send(P.Generate(request_id="c1", messages=CHAT, sampling=P.Sampling()))
        assert both.wait(20)
        time.sleep(0.3)  # the stream's thread is now waiting for the next line
        client.send(P.Cancel("c1"))
        assert finished.wait(20), "the cancel did not end the reply"
    done = events[-1]
    assert isinstance(done, P.Done) and done.finish_reason == "cancelled" and done.text == "Hello there"
    assert done.metrics["source"] == SOURCE  # no last line came: nothing of the server's


def test_a_look_alike_without_the_native_api_gets_v1(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    st.native = False
    with RemoteClient(url, api_key="k") as client:
        client.connect()
        first = client.collect(P.Generate(request_id="a", messages=CHAT))
        second = client.collect(P.Generate(request_id="b", messages=CHAT))
        assert client.engine == ""
    assert [p for p, _ in st.posts] == ["/api/chat", "/v1/chat/completions", "/v1/chat/completions"]
    assert first.text == second.text == "Hello there" and first.metrics["source"] == SOURCE


def test_an_unknown_model_is_ollamas_own_words_not_a_fallback(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    with RemoteClient(url, api_key="k", model="nope:1b") as client:
        client.connect()
        with pytest.raises(EngineError, match="HTTP 404: model 'nope:1b' not found"):
            client.collect(P.Generate(request_id="u", messages=CHAT))
        assert client.engine == "ollama"  # Ollama's JSON error: its native API is there
    assert [p for p, _ in st.posts] == ["/api/chat"]


def test_another_server_is_not_asked_natively(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    with RemoteClient(url, api_key="k") as client:
        client.connect()
        assert client.engine == ""  # its /api/version is a 404
        client.collect(P.Generate(request_id="v", messages=CHAT))
    assert [r for r in st.requests if r.startswith("/api/") or r.startswith("/v1/chat")] == [
        "/api/version", "/v1/chat/completions"]


def test_an_engine_named_is_not_probed(fake_ollama: tuple[str, FakeOllama]) -> None:
    url, st = fake_ollama
    with RemoteClient(url, api_key="k", engine="vllm") as client:
        client.connect()
        done = client.collect(P.Generate(request_id="n", messages=CHAT))
    assert "/api/version" not in st.gets and [p for p, _ in st.posts] == ["/v1/chat/completions"]
    assert done.metrics["source"] == SOURCE  # Ollama's /v1: usage alone


class _Chunks:
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def iter_raw(self) -> Any:
        return iter(self.chunks)


def test_json_lines_are_joined_across_chunks_and_bounded() -> None:
    lines = list(json_lines(_Chunks(b'{"a":', b' 1}\n\n{"b": 2}\n{"c"', b": 3}"), 64))  # type: ignore[arg-type]
    assert lines == ['{"a": 1}', '{"b": 2}', '{"c": 3}']
    with pytest.raises(TooLarge):
        list(json_lines(_Chunks(b"x" * 40, b"x" * 40), 64))  # type: ignore[arg-type]  # no newline yet: over
    with pytest.raises(TooLarge):
        list(json_lines(_Chunks(b"x" * 40, b"x" * 40 + b"\n"), 64))  # type: ignore[arg-type]
