"""`roofline serve` streams one chunk per generated token, as llama-server does, even when the token's text
is empty or held back by a stop string; and Roofline's remote backend takes its prefill and decode numbers
from the server's `timings`. One small server (2 slots) on the real default model, bound to 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from served import KEY, Served, open_stream, serve, sse_events

pytestmark = pytest.mark.model

NEVER = "\u00a7" * 80  # a stop string the reply never contains: it holds back up to 79 characters of text


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "2048") as s:
        yield s


def stream(served: Served, body: dict) -> list:
    conn, resp = open_stream(served, {**body, "stream_options": {"include_usage": True}})
    try:
        assert resp.status == 200
        return list(sse_events(resp))
    finally:
        conn.close()


def test_every_token_is_a_chunk_even_when_its_text_is_held_back(served: Served) -> None:
    body = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "ignore_eos": True, "stop": [NEVER]}
    events = stream(served, body)
    assert events[-1] == "[DONE]"
    usage = events[-2]["usage"]
    token_chunks = [e for e in events[:-3] if e["choices"] and e["choices"][0]["finish_reason"] is None]
    assert usage["completion_tokens"] == 12
    assert len(token_chunks) == 12  # one per token, though the held-back text arrives at the end
    texts = [e["choices"][0]["text"] for e in token_chunks]
    assert texts[0] == ""  # a few characters cannot be sent while they may begin the stop string
    streamed = "".join(e["choices"][0]["text"] for e in events[:-2])
    plain = served.client().completions.create(model=served.model, prompt=body["prompt"], max_tokens=12,
                                               temperature=0, stop=[NEVER], extra_body={"ignore_eos": True})
    assert streamed == plain.choices[0].text and streamed  # nothing lost, nothing doubled


def test_stop_string_still_cuts_the_text_of_a_chunk_per_token_stream(served: Served) -> None:
    events = stream(served, {"prompt": "Count: one, two, three, four, five,", "max_tokens": 30, "temperature": 0,
                             "stop": [" eight"]})
    text = "".join(e["choices"][0]["text"] for e in events[:-2] if e["choices"])
    last = events[-3]
    assert last["choices"][0]["finish_reason"] == "stop" and "eight" not in text and "seven" in text
    token_chunks = [e for e in events[:-3] if e["choices"][0]["finish_reason"] is None]
    assert len(token_chunks) == events[-2]["usage"]["completion_tokens"]


def test_remote_backend_shows_the_servers_prefill_numbers(served: Served) -> None:
    from app.engine import protocol as P
    from app.engine.remote.backend import RemoteClient
    from app.engine.remote.server_timings import SERVER_SOURCE

    with RemoteClient(served.url, api_key=KEY) as remote:
        remote.connect()
        done = remote.collect(P.Generate(request_id="t1", prompt="The capital of France is",
                                         sampling=P.Sampling(max_tokens=6, temperature=0.0, ignore_eos=True)))
    m = done.metrics
    server = m.get("server_timings")
    assert m["source"] == SERVER_SOURCE and server
    assert m["prefill_tokens"] == server["prompt_n"] and m["prefill_ms"] == server["prompt_ms"] > 0
    assert m["prefill_tokens"] + m["reused_tokens"] == m["usage"]["prompt_tokens"]
    assert m["decode_tokens"] == server["predicted_n"] - 1 == 5 and m["decode_tps"] > 0


def test_tokens_without_text_still_stream_a_chunk_each(tmp_path: Path) -> None:
    """A tiny random-weight model (tests/helpers/synth_gguf.py) picks byte tokens, <unk> and <s> that detokenize to
    nothing or to half a UTF-8 character: every one of them still arrives as a chunk."""
    from synth_gguf import write_synthetic_gguf

    model = write_synthetic_gguf(tmp_path / "random.gguf", n_layers=1)
    with serve(model, tmp_path / "home", "--parallel", "1", "--ctx", "256") as random_model:
        events = stream(random_model, {"prompt": "abc", "max_tokens": 48, "temperature": 0, "ignore_eos": True})
    usage = events[-2]["usage"]
    token_chunks = [e for e in events[:-3] if e["choices"][0]["finish_reason"] is None]
    assert usage["completion_tokens"] == 48 and len(token_chunks) == 48
    assert any(e["choices"][0]["text"] == "" for e in token_chunks)  # the case this test is about did occur
