"""The window's Serve switch and the dashboard's server traffic: `roofline serve` started and stopped from the
toolbar (a stand-in server, tests/helpers/fake_serve.py, with the same options and /metrics names), the status bar's
URL and requests in flight, a server that dies, the window closing, the loopback-or-key rule; and the
/metrics arithmetic of app.core.metrics.serve_traffic."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from app.core.metrics.serve_traffic import parse_metrics, traffic
from app.ui.serve.control import ServeControl
from app.ui.window.main_window import MainWindow
from fake_window import make_window

FAKE = [sys.executable, str(Path(__file__).resolve().parents[2] / "helpers" / "fake_serve.py")]


def _window(qtbot, monkeypatch: pytest.MonkeyPatch, **env: str) -> MainWindow:  # type: ignore[no-untyped-def]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    win = make_window(qtbot)
    control = win.serve_switch.control
    control._command = FAKE
    control.port = 0  # a free port: tests never take 8080
    win.session.model_path = "/models/fake-Q4_K_M.gguf"
    return win


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_switch_serves_shows_url_and_requests_in_flight_then_stops(qtbot, monkeypatch) -> None:
    win = _window(qtbot, monkeypatch)
    switch, control = win.serve_switch, win.serve_switch.control
    switch.action.trigger()
    qtbot.waitUntil(lambda: control.state == "serving", timeout=20000)
    pid = control.pid
    assert pid and control.url.startswith("http://127.0.0.1:") and control.url.endswith("/v1")
    qtbot.waitUntil(lambda: "3 in flight" in win.status_line.part("serve"), timeout=10000)
    assert control.url in win.status_line.part("serve") and "(1 waiting)" in win.status_line.part("serve")
    panel = win.dashboard.server_traffic
    assert not panel.isHidden() and control.url in panel.title()
    assert panel.card_kv.value.text() == "300" and "25 %" in panel.card_kv.detail.text()
    assert panel.card_flight.value.text() == "3"
    qtbot.waitUntil(lambda: panel.card_rate.value.text() != "0 tok/s", timeout=10000)  # second poll: a rate
    assert panel.card_ttft.value.text() == "250 ms"
    switch.action.trigger()  # off
    assert control.state == "stopped" and not control.running and _gone(pid)
    assert win.status_line.part("serve") == "" and panel.isHidden() and not switch.action.isChecked()


def test_closing_the_window_stops_the_server(qtbot, monkeypatch) -> None:
    win = _window(qtbot, monkeypatch)
    control = win.serve_switch.control
    win.serve_switch.action.trigger()
    qtbot.waitUntil(lambda: control.state == "serving", timeout=20000)
    pid = control.pid
    assert pid is not None
    win.close()
    assert _gone(pid)


def test_a_server_that_dies_says_so_in_the_banner(qtbot, monkeypatch) -> None:
    win = _window(qtbot, monkeypatch, FAKE_SERVE_DIE_AFTER="1.5")
    switch = win.serve_switch
    switch.action.trigger()
    qtbot.waitUntil(lambda: switch.control.state == "serving", timeout=20000)
    qtbot.waitUntil(lambda: switch.control.state == "stopped", timeout=20000)
    assert not win.banner.isHidden()
    assert win.banner.text() == "The server stopped: the engine died: out of memory"
    assert not switch.action.isChecked() and win.status_line.part("serve") == ""


def test_no_model_no_server(qtbot, monkeypatch) -> None:
    win = _window(qtbot, monkeypatch)
    win.session.model_path = None
    win.serve_switch.action.trigger()
    assert not win.serve_switch.control.running and not win.serve_switch.action.isChecked()
    assert "Load a model first" in win.banner.text()


def test_a_non_loopback_host_needs_an_api_key(qtbot) -> None:
    control = ServeControl(None, host="0.0.0.0", command=FAKE)
    problem = control.start(Path("/models/x.gguf"))
    assert problem and "without an API key" in problem and not control.running
    control.api_key = "k"
    assert control.check() is None
    assert ServeControl(None, host="127.0.0.1").check() is None
    assert ServeControl(None, host="localhost").check() is None


METRICS = """# HELP llamacpp:requests_processing x
llamacpp:requests_processing 3
llamacpp:requests_deferred 2
llamacpp:kv_cache_tokens 1234
llamacpp:kv_cache_usage_ratio 0.5
llamacpp:tokens_predicted_total {tokens}
llamacpp:time_to_first_token_seconds_bucket{{le="+Inf"}} {count}
llamacpp:time_to_first_token_seconds_sum {ttft_sum}
llamacpp:time_to_first_token_seconds_count {count}
llamacpp:nan_value nan
"""


def test_traffic_from_two_polls() -> None:
    a = parse_metrics(METRICS.format(tokens=100, ttft_sum=1.0, count=4))
    b = parse_metrics(METRICS.format(tokens=160, ttft_sum=1.9, count=7))
    assert "llamacpp:nan_value" not in b and not any("{" in k for k in b)
    t = traffic(b, 12.0, a, 10.0)
    assert (t.processing, t.deferred, t.in_flight, t.kv_tokens, t.kv_ratio) == (3, 2, 5, 1234, 0.5)
    assert t.decode_tps == pytest.approx(30.0)  # 60 tokens in 2 s
    assert t.finished == 3 and t.ttft_ms == pytest.approx(300.0)  # 0.9 s over 3 requests
    first = traffic(a, 10.0)
    assert first.decode_tps == 0.0 and first.ttft_ms is None and first.tokens_total == 100
    restarted = traffic(parse_metrics(METRICS.format(tokens=10, ttft_sum=0.2, count=1)), 12.0, b, 10.0)
    assert restarted.decode_tps == pytest.approx(5.0) and restarted.ttft_ms == pytest.approx(200.0)
    # a text the shared parser refuses is an empty snapshot, not a half-read one
    assert parse_metrics(METRICS.format(tokens=1, ttft_sum=0.1, count=1) + "garbage line\n") == {}


@pytest.mark.model
def test_the_real_roofline_serve_is_started_polled_and_stopped(qtbot, default_model: Path, roofline_home: Path,
                                                               monkeypatch) -> None:
    """ServeControl's default command: the real `roofline serve` on the default model (loopback, a free
    port); a request through it shows up in the traffic read from its real /metrics."""
    import json
    import urllib.request

    monkeypatch.delenv("ROOFLINE_API_KEY", raising=False)
    control = ServeControl(None, port=0, parallel=2, ctx=1024, threads=2)
    seen: list = []
    control.traffic.connect(seen.append)
    assert control.start(default_model) is None
    try:
        qtbot.waitUntil(lambda: control.state == "serving", timeout=120000)
        assert control.url.startswith("http://127.0.0.1:") and control.url.endswith("/v1")
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0,
                           "ignore_eos": True}).encode()
        req = urllib.request.Request(control.url + "/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            assert json.loads(resp.read())["usage"]["completion_tokens"] == 5
        # the request's tokens are counted at its Done and the in-flight gauge at the engine's next stats: a
        # poll between the two sees both (5 tokens, 1 in flight), so wait for the poll after them
        qtbot.waitUntil(lambda: bool(seen) and seen[-1].tokens_total == 5 and seen[-1].in_flight == 0,
                        timeout=20000)
        assert seen[-1].kv_tokens > 0  # the finished slot keeps its cached cells
        pid = control.pid
        assert pid is not None
    finally:
        control.stop()
    assert not control.running and _gone(pid)


def test_switch_tooltip_gives_the_servers_estimated_extra_memory(qtbot, monkeypatch, tmp_path: Path) -> None:
    from app.core.gguf.info import inspect_gguf
    from app.core.metrics.phase import fmt_bytes
    from app.core.predict.memory import MemoryConfig, estimate_memory
    from synth_gguf import write_synthetic_gguf

    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=2)
    win = _window(qtbot, monkeypatch)
    win.session.model_path = str(model)
    switch = win.serve_switch
    switch.estimate()
    qtbot.waitUntil(lambda: "more memory" in switch.action.toolTip(), timeout=10000)
    est = estimate_memory(inspect_gguf(model), MemoryConfig(n_ctx=8192, n_seq=4), has_gpu=False)
    assert est.kv_bytes > 0 and switch.extra is not None and est.kv_bytes <= switch.extra < est.total
    assert f"about {fmt_bytes(switch.extra)} more memory" in switch.action.toolTip()
    assert "own copy of the model" in switch.action.toolTip() and "stays loaded" in switch.action.toolTip()
