"""`roofline chat --remote` against a fake Ollama speaking its native API (tests/helpers/fake_ollama.py): the
reply's prefill and decode are Ollama's own, on the lines where llama-server's `timings` are printed, and the
server line adds them to /api/ps's model memory; a hostile number is one note line, exit 0, no traceback."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.core.remote.ollama import REPLY_SOURCE
from fake_ollama import FakeOllama


def test_chat_remote_prints_ollamas_own_prefill_and_decode(fake_ollama: tuple[str, FakeOllama],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    url, st = fake_ollama
    assert main(["chat", "--remote", url, "--api-key", "k", "-n", "7", "--temp", "0.2", "hello"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"-- finished: stop; {REPLY_SOURCE}" in out
    assert any(x.startswith("prefill : 512 tok in 250.0 ms = 2048.0 tok/s") for x in out), out
    assert any(x.startswith("decode  : 128 tok in 2560.0 ms = 50.0 tok/s") for x in out), out
    server = next(x for x in out if x.startswith("server: Ollama"))
    assert server.startswith("server: Ollama (this reply; model memory now): prefill 2,048 tok/s · decode 50.0 tok/s")
    assert "model 6.2 GiB, 6.2 GiB on the GPU" in server and server.endswith("load 100 ms")
    assert [p for p, _ in st.posts] == ["/api/chat"]
    assert st.posts[0][1]["options"]["num_predict"] == 7 and st.posts[0][1]["options"]["temperature"] == 0.2


def test_chat_remote_json_carries_the_servers_numbers(fake_ollama: tuple[str, FakeOllama],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = fake_ollama
    assert main(["chat", "--remote", url, "--api-key", "k", "--json", "hello"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metrics"]["source"] == REPLY_SOURCE and data["metrics"]["prefill_tokens"] == 512
    server = data["server"]
    assert server["prefill_tps"] == pytest.approx(2048.0) and server["decode_tps"] == pytest.approx(50.0)
    assert server["kv_capacity"] == 16384 and server["load_ms"] == pytest.approx(100.0)


def test_a_hostile_number_is_one_note_line(fake_ollama: tuple[str, FakeOllama],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    url, st = fake_ollama
    st.last = ('"prompt_eval_count": 512, "prompt_eval_duration": "\\u001b[2J250ms", "eval_count": 129, '
               '"eval_duration": 2560000000')
    assert main(["chat", "--remote", url, "--api-key", "k", "hello"]) == 0
    captured = capsys.readouterr()
    notes = [x for x in captured.out.splitlines() if x.startswith("note    :")]
    assert len(notes) == 1 and "Ollama's prompt_eval_duration" in notes[0] and "not a duration" in notes[0]
    assert "\x1b" not in captured.out and "Traceback" not in captured.out + captured.err
    assert "-- finished: stop; client-side wall clock" in captured.out  # nothing of the server's phases shown
    server = next(x for x in captured.out.splitlines() if x.startswith("server: Ollama"))
    assert "prefill — · decode —" in server  # /api/ps alone: no rates guessed
