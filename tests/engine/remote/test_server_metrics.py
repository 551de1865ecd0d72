"""The metrics poller over HTTP: engines told from what they serve, recorded expositions read over two polls,
roofline serve's own /metrics, and a hostile /metrics refused in one line without stalling the chat."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.engine import protocol as P
from app.engine.remote.backend import RemoteClient
from app.engine.remote.server_metrics import MetricsSource, MetricsUnavailable
from app_server import app_server
from metrics_server import FakeEngine

DATA = Path(__file__).resolve().parents[2] / "data" / "remote_metrics"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _source(url: str, **kw) -> MetricsSource:
    client = RemoteClient(url, api_key="k")
    client.start()
    return MetricsSource(client, **kw)


def test_vllm_is_detected_and_read_over_two_polls(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = _text("vllm-a.prom")
    source = _source(url + "/v1")  # the /v1 of a base URL is not where /metrics lives
    assert source.detect() == "vllm"
    first = source.poll()
    assert first.window_s is None and first.label == "vLLM"
    st.bodies["/metrics"] = _text("vllm-b.prom")
    second = source.poll()
    assert second.window_s is not None and second.window_s > 0
    assert (second.running, second.waiting, second.kv_fraction) == (2, 1, 0.25)
    assert second.ttft is not None and second.ttft.count == 4  # the window's 4, not the server's 6
    assert st.requests.count("/metrics") == 2  # detect's scrape was the first poll's


def test_tensorrt_llm_serves_its_metrics_elsewhere(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.bodies["/prometheus/metrics"] = _text("trtllm-b.prom")
    source = _source(url)
    assert source.detect() == "trtllm"
    assert source.poll().kv_capacity == 16384


def test_ollama_is_told_by_its_version_and_read_from_api_ps(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.bodies["/api/version"] = _text("ollama-version.json")
    st.bodies["/api/ps"] = _text("ollama-ps.json")
    source = _source(url)
    m = source.poll()
    assert m.engine == "ollama" and m.kv_capacity == 16384 and m.memory_gpu_bytes


def test_llama_server_without_metrics_is_named_and_explained(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.bodies["/props"] = '{"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}'
    source = _source(url)
    with pytest.raises(MetricsUnavailable, match="without --metrics"):
        source.poll()


def test_the_engine_can_be_forced(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = _text("llama-server-b.prom")
    m = _source(url, engine="llama-server").poll()
    assert m.decode_tps and m.kv_fraction is None  # no /slots served
    st.bodies["/slots"] = _text("llama-server-slots.json")
    m = _source(url, engine="llama-server").poll()
    assert (m.kv_tokens, m.kv_capacity) == (1217, 16384)
    with pytest.raises(MetricsUnavailable, match="unknown engine"):
        _source(url, engine="tgi")


def test_nothing_to_read_is_one_line(fake_engine: tuple[str, FakeEngine]) -> None:
    url, _ = fake_engine
    with pytest.raises(MetricsUnavailable) as err:
        _source(url).poll()
    assert "\n" not in str(err.value) and "no metrics" in str(err.value)


@pytest.mark.parametrize("mode, why", [("endless", "more than"), ("stall", "did not answer"),
                                        ("drip", "given up")])
def test_a_hostile_metrics_endpoint_is_refused_in_one_line(fake_engine: tuple[str, FakeEngine], mode: str,
                                                           why: str) -> None:
    url, st = fake_engine
    st.metrics_mode = mode
    source = _source(url, engine="vllm", timeout=1.0, max_bytes=1 << 20)
    with pytest.raises(MetricsUnavailable) as err:
        source.poll()
    assert why in str(err.value) and "\n" not in str(err.value)


def test_malformed_metrics_are_refused_in_one_line(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.bodies["/metrics"] = 'vllm:num_requests_running{model_name="m" 1\n'
    with pytest.raises(MetricsUnavailable, match="not Prometheus"):
        _source(url, engine="vllm").poll()


def test_a_stalled_metrics_endpoint_never_holds_the_chat(fake_engine: tuple[str, FakeEngine]) -> None:
    url, st = fake_engine
    st.metrics_mode = "stall"  # /metrics answers its headers, then nothing until released
    source = _source(url, engine="vllm", timeout=60.0)
    failed: list[str] = []

    def poll() -> None:
        try:
            source.poll()
        except MetricsUnavailable as exc:
            failed.append(str(exc))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    with RemoteClient(url, api_key="k") as chat:
        chat.connect()
        events = list(chat.generate(P.Generate(chat.new_request_id(), messages=[{"role": "user", "content": "hi"}])))
    assert "".join(e.text for e in events if isinstance(e, P.Token)) == "Hello there"
    assert poller.is_alive()  # the chat ended while the poll still waited on /metrics
    st.release.set()
    poller.join(10)
    assert not poller.is_alive()


def test_roofline_serves_own_metrics_are_read_as_roofline_serve() -> None:
    with app_server() as srv:
        metrics = srv.hub.metrics
        metrics.on_stats(running=1, waiting=2, kv_tokens=512, n_ctx=2048, steps=10)
        source = _source(f"http://127.0.0.1:{srv.port}")
        first = source.poll()
        assert first.label == "roofline serve" and first.kv_fraction == pytest.approx(0.25)
        assert (first.running, first.waiting, first.kv_tokens) == (1, 2, 512)
        for _ in range(3):
            metrics.on_done("stop", {"prompt_n": 100, "prompt_ms": 50.0, "predicted_n": 21, "predicted_ms": 400.0,
                                     "ttft_ms": 80.0, "itl_ms": [20.0] * 20})
        second = source.poll()
        assert second.ttft is not None and second.ttft.count == 3 and second.ttft.mean_ms == pytest.approx(80.0)
        assert second.prefill_tps == pytest.approx(2000.0)
        assert second.itl is not None and second.itl.count == 60
