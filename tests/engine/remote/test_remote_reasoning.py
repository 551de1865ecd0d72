"""Thinking apart from the answer through the remote backend and `roofline chat`, against a stand-in
OpenAI-compatible server whose model thinks (inline `<think>` tags, or `reasoning_content` deltas)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.engine import protocol as P
from app.engine.remote.backend import RemoteClient
from thinking_server import ANSWER, INLINE_CHUNKS, THINKING, ThinkingServer


def _chat(url: str) -> tuple[list[P.Token], P.Done]:
    with RemoteClient(url, api_key="k") as client:
        client.connect()
        req = P.Generate(request_id="t1", messages=[{"role": "user", "content": "hi"}],
                         sampling=P.Sampling(temperature=0.0, max_tokens=32))
        events = list(client.generate(req))
    done = events[-1]
    assert isinstance(done, P.Done)
    return [e for e in events if isinstance(e, P.Token)], done


@pytest.mark.parametrize("mode", ["inline", "separate"])
def test_remote_reply_keeps_thinking_apart(mode: str) -> None:
    with ThinkingServer(mode) as url:
        tokens, done = _chat(url)
    assert done.text == ANSWER
    assert done.reasoning == THINKING
    assert "".join(t.text for t in tokens) == ANSWER
    assert "".join(t.reasoning for t in tokens).strip() == THINKING
    assert "<" not in "".join(t.text + t.reasoning for t in tokens)
    m = done.metrics
    assert m["reasoning_tokens"] >= 2
    assert m["ttft_answer_ms"] is not None and m["ttft_answer_ms"] >= m["ttft_ms"]


def test_a_request_that_opts_out_is_not_split() -> None:
    with ThinkingServer("inline") as url, RemoteClient(url, api_key="k") as client:
        client.connect()
        req = P.Generate(request_id="t2", messages=[{"role": "user", "content": "hi"}], split_reasoning=False,
                         sampling=P.Sampling(max_tokens=32))
        done = list(client.generate(req))[-1]
    assert done.text == "".join(INLINE_CHUNKS) and done.reasoning == ""


def _cli(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "chat", "--remote", url, "--api-key", "k", *extra,
                           "hi"], capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_cli_json_has_the_answer_in_text_and_the_thinking_in_reasoning() -> None:
    with ThinkingServer("inline") as url:
        res = _cli(url, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["text"] == ANSWER
    assert out["reasoning"] == THINKING
    assert out["metrics"]["reasoning_tokens"] >= 2


def test_cli_prints_thinking_apart_from_the_answer() -> None:
    with ThinkingServer("inline") as url:
        res = _cli(url)
    assert res.returncode == 0, res.stderr
    answer, _, summary = res.stdout.partition("-- finished")
    assert answer.strip() == ANSWER  # stdout: the answer alone
    assert "[thinking]" in res.stderr and THINKING in res.stderr and "[/thinking]" in res.stderr
    assert "thinking:" in summary and "first answer token at" in summary
