"""The remote backend's helper that reads llama-server's `timings` (app.engine.remote.server_timings): the
server's prefill and decode numbers replace what the client's clock can see; malformed blocks are ignored,
implausible numbers left out with a note; and `roofline serve`'s real stream carries a block it reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.remote.openai_stream import client_metrics
from app.engine.remote.server_timings import (
    SERVER_SOURCE,
    apply_server_timings,
    parse_timings,
    read_timings,
    timings_in_line,
)
from served import Served, open_stream, serve

LAST = {"choices": [{"index": 0, "finish_reason": "stop", "text": ""}],
        "timings": {"prompt_n": 40, "prompt_ms": 80.0, "prompt_per_second": 500.0, "predicted_n": 11,
                    "predicted_ms": 200.0, "cache_n": 8}}


def client_view() -> dict:
    times = [1.0 + 0.02 * i for i in range(11)]
    return client_metrics(0.5, 1.3, 500.0, times, {"prompt_tokens": 48, "completion_tokens": 11}, chat=False)


def test_server_timings_replace_the_clients_guess() -> None:
    timings = timings_in_line(b"data: " + json.dumps(LAST).encode() + b"\n")
    assert timings is not None and timings["prompt_n"] == 40
    before = client_view()
    assert before["prefill_ms"] == 500.0  # all the client sees: its time to the first token
    after = apply_server_timings(before, timings)
    assert after["prefill_tokens"] == 40 and after["prefill_ms"] == 80.0 and after["reused_tokens"] == 8
    assert after["prefill_tps"] == pytest.approx(500.0)
    assert after["decode_tokens"] == 10 and after["decode_tps"] == pytest.approx(50.0)
    assert after["source"] == SERVER_SOURCE and not after["source"].startswith("client-side")
    assert after["ttft_ms"] == 500.0 and after["token_times"] == before["token_times"]  # the client's own
    assert apply_server_timings(before, None) is before


@pytest.mark.parametrize("line", [
    b"data: [DONE]", b": keep-alive", b"data: {not json", b'data: {"timings": 3}',
    b'data: {"timings": {"prompt_n": -1, "prompt_ms": 5}}', b'data: {"timings": {"prompt_n": 4}}',
    b'data: {"timings": {"prompt_n": 4, "prompt_ms": NaN}}', b'data: {"timings": {"prompt_n": true, "prompt_ms": 1}}',
    b'data: {"choices": []}', b"\xff\xfe",
    b'data: {"timings": {"prompt_n": 1e300, "prompt_ms": 5}}',
    b'data: {"timings": {"prompt_n": 4, "prompt_ms": 1e400}}',
    b'data: {"timings": {"prompt_n": 4.5, "prompt_ms": 5}}',
    b'data: {"timings": {"prompt_n": 40, "prompt_ms": 1e-300}}',
    b'data: {"timings": {"prompt_n": [4], "prompt_ms": 5}}', b'data: {"timings": {"prompt_n": 4, "prompt_ms": "5"}}',
    b'data: {"timings": {"prompt_n": 4, "prompt_ms": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
])
def test_malformed_or_missing_timings_are_ignored(line: bytes) -> None:
    assert timings_in_line(line) is None


def test_only_usable_numbers_are_kept() -> None:
    assert parse_timings({"prompt_n": 3, "prompt_ms": 1.5, "cache_n": "x", "predicted_ms": -2}) == \
        {"prompt_n": 3.0, "prompt_ms": 1.5}


def test_implausible_numbers_are_left_out_with_a_note_each() -> None:
    timings, notes = read_timings({"prompt_n": 40, "prompt_ms": 80.0, "predicted_n": 1e300, "predicted_ms": 9.0,
                                   "cache_n": 2.5})
    assert timings == {"prompt_n": 40.0, "prompt_ms": 80.0, "predicted_ms": 9.0}
    assert notes == ["the server's timings.predicted_n (1e+300) is not a token count: ignored",
                     "the server's timings.cache_n (2.5) is not a token count: ignored"]
    timings, notes = read_timings({"prompt_n": 40, "prompt_ms": 80.0, "predicted_n": 11, "predicted_ms": 1e-300})
    assert timings == {"prompt_n": 40.0, "prompt_ms": 80.0}  # 11 tokens in 1e-300 ms: not a decode
    assert len(notes) == 1 and "would mean over 10,000,000 tok/s: ignored" in notes[0]
    timings, notes = read_timings({"prompt_n": 40, "prompt_ms": 10**400})
    assert timings is None and len(notes) == 2 and "timings.prompt_ms" in notes[0] and "not shown" in notes[1]
    assert read_timings({"predicted_n": 3, "predicted_ms": 5.0}) == (None, [])  # no prompt numbers: nothing wrong


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "1", "--ctx", "512") as s:
        yield s


@pytest.mark.model
def test_roofline_serves_stream_carries_timings_the_helper_reads(served: Served) -> None:
    conn, resp = open_stream(served, {"prompt": "The sun rises in the", "max_tokens": 6, "temperature": 0,
                                      "ignore_eos": True, "stream_options": {"include_usage": True}})
    timings, usage = None, None
    try:
        for raw in resp:
            timings = timings_in_line(raw) or timings
            if raw.startswith(b"data: {") and b'"usage"' in raw:
                usage = json.loads(raw[6:])["usage"]
    finally:
        conn.close()
    assert timings is not None and usage is not None
    assert timings["prompt_n"] + timings.get("cache_n", 0) == usage["prompt_tokens"]
    assert timings["predicted_n"] == 6 and timings["prompt_ms"] > 0
    assert apply_server_timings(client_view(), timings)["prefill_tps"] > 0
