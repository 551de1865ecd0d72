"""`roofline top --remote` and `roofline chat --remote`'s server line, against a fake engine serving the
recorded expositions (tests/data/remote_metrics)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import app.commands.top as top
from app.cli import main
from metrics_server import FakeEngine

DATA = Path(__file__).resolve().parents[1] / "data" / "remote_metrics"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_once_prints_one_screen(fake_engine: tuple[str, FakeEngine], capsys: pytest.CaptureFixture[str]) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = _text("sglang-b.prom")
    assert main(["top", "--remote", url, "--api-key", "k", "--once"]) == 0
    out = capsys.readouterr().out
    assert "server: SGLang · since the server started" in out
    assert "2 running · 1 waiting" in out and "4,096 of 16,384 tokens" in out
    assert "tok/s per request (ITL mean)" in out  # SGLang has no decode time: its rate comes from ITL


def test_once_json(fake_engine: tuple[str, FakeEngine], capsys: pytest.CaptureFixture[str]) -> None:
    url, st = fake_engine
    st.bodies["/prometheus/metrics"] = _text("trtllm-b.prom")
    assert main(["top", "--remote", url, "--api-key", "k", "--once", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "server: TensorRT-LLM" and data["kv_capacity"] == 16384


def test_unreadable_metrics_are_one_line_and_status_1(fake_engine: tuple[str, FakeEngine],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = "vllm:num_requests_running{ 1\n"
    assert main(["top", "--remote", url, "--api-key", "k", "--once", "--engine", "vllm"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not Prometheus" in err


def test_live_screens_refresh_over_a_window(fake_engine: tuple[str, FakeEngine], capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = _text("vllm-a.prom")
    frames = []

    def sleep(_s: float) -> None:
        frames.append(1)
        st.bodies["/metrics"] = _text("vllm-b.prom")
        if len(frames) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(top.time, "sleep", sleep)
    assert main(["top", "--remote", url, "--api-key", "k", "--interval", "0.2"]) == 0
    out = capsys.readouterr().out
    first, second = out.split("roofline top · ")[1:]
    assert "since the server started" in first and "over the last" in second
    assert "(4 requests)" in second  # the window's requests, not the server's 6


def test_chat_remote_prints_the_servers_phases(fake_engine: tuple[str, FakeEngine],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = _text("vllm-a.prom")
    st.after_chat["/metrics"] = _text("vllm-b.prom")
    assert main(["chat", "--remote", url, "--api-key", "k", "hello"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("server: vLLM"))
    assert "prefill 2,048 tok/s" in line and "decode 50.0 tok/s" in line and "KV 25 %" in line


def test_chat_remote_goes_on_when_metrics_stall(fake_engine: tuple[str, FakeEngine],
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import app.engine.remote.server_metrics as sm

    monkeypatch.setattr(sm, "DEFAULT_TIMEOUT_S", 0.5)
    url, st = fake_engine
    st.metrics_mode = "stall"
    assert main(["chat", "--remote", url, "--api-key", "k", "--server-engine", "vllm", "hello"]) == 0
    out = capsys.readouterr().out
    assert "Hello there" in out
    assert any(x.startswith("server  : ") and "did not answer" in x for x in out.splitlines()), out


def _slow_first_poll(monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
    """The chat's first metrics poll starts `delay` s late, as on a busy machine."""
    import app.engine.remote.server_metrics as sm

    original = sm.MetricsSource.poll
    polls: list[int] = []

    def poll(self: sm.MetricsSource) -> object:
        polls.append(1)
        if len(polls) == 1:
            time.sleep(delay)
        return original(self)

    monkeypatch.setattr(sm.MetricsSource, "poll", poll)


def test_chat_remote_takes_its_baseline_before_the_request(fake_engine: tuple[str, FakeEngine],
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = _text("vllm-a.prom")
    st.after_chat["/metrics"] = _text("vllm-b.prom")
    _slow_first_poll(monkeypatch, 0.4)
    assert main(["chat", "--remote", url, "--api-key", "k", "hello"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("server: vLLM"))
    assert "prefill 2,048 tok/s" in line and "decode 50.0 tok/s" in line
    asked = [r for r in st.requests if r in ("/metrics", "/v1/chat/completions")]
    assert asked == ["/metrics", "/v1/chat/completions", "/metrics"]


def test_chat_remote_leaves_out_a_baseline_that_came_after_the_request(
        fake_engine: tuple[str, FakeEngine], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import app.engine.remote.server_metrics as sm

    monkeypatch.setattr(sm, "DEFAULT_TIMEOUT_S", 0.3)
    url, st = fake_engine
    st.bodies["/metrics"] = _text("vllm-a.prom")
    st.after_chat["/metrics"] = _text("vllm-b.prom")
    _slow_first_poll(monkeypatch, 0.5)  # past the wait for it, within the summary's wait for it
    assert main(["chat", "--remote", url, "--api-key", "k", "--server-engine", "vllm", "hello"]) == 0
    out = capsys.readouterr().out
    assert "Hello there" in out
    assert not any(x.startswith("server: vLLM") for x in out.splitlines()), out
    assert any(x.startswith("server  : ") and "only after the request" in x for x in out.splitlines()), out
