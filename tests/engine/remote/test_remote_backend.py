"""The remote backend against llama-cpp-python's own OpenAI-compatible server (real server, real model),
a server killed mid-reply, a socket that never answers, the http security default, and key storage."""

from __future__ import annotations

import http.server
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from app.engine.client import EngineError
from app.engine.remote.backend import SOURCE, RemoteClient
from llama_server import KEY, start_server


def _greedy(n: int) -> P.Sampling:
    return P.Sampling(temperature=0.0, max_tokens=n, seed=1, ignore_eos=True)


@pytest.mark.model
def test_chat_streams_with_client_side_phase_metrics(server: str) -> None:
    with RemoteClient(server, api_key=KEY) as client:
        loaded = client.connect()
        assert loaded.chat_template_source == "server" and "remote" in loaded.model_desc
        req = P.Generate(request_id=client.new_request_id(), sampling=_greedy(12),
                         messages=[{"role": "user", "content": "Write one sentence about the sea."}])
        t_sent = time.monotonic()
        events = list(client.generate(req))
    tokens, done = events[:-1], events[-1]
    assert isinstance(done, P.Done) and all(isinstance(t, P.Token) for t in tokens)
    assert done.text == "".join(t.text for t in tokens) and done.text.strip()
    m = PhaseMetrics.from_dict(done.metrics)
    assert m.source == SOURCE
    assert 0 < m.ttft_ms < m.total_ms
    assert len(m.itl_ms) == len(tokens) - 1 and m.decode_wall_tps > 0
    # The metrics agree with each token's own arrival stamp (the same monotonic clock as this test):
    # TTFT no later than the first arrival seen from here, each gap the gap between two arrivals.
    arrivals = [t.t for t in tokens]
    assert arrivals == sorted(arrivals) and arrivals[0] >= t_sent
    assert m.ttft_ms <= (arrivals[0] - t_sent) * 1000.0 + 1e-3
    assert m.itl_ms == pytest.approx([(b - a) * 1000.0 for a, b in itertools.pairwise(arrivals)], abs=1e-6)
    assert m.decode_wall_ms == pytest.approx((arrivals[-1] - arrivals[0]) * 1000.0, abs=1e-6)


@pytest.mark.model
def test_raw_prompt_and_cancel_from_another_thread(server: str) -> None:
    events: list[Any] = []
    got_done = threading.Event()

    def on_event(ev: Any) -> None:
        events.append(ev)
        if isinstance(ev, P.Token) and len([e for e in events if isinstance(e, P.Token)]) == 2:
            client.send(P.Cancel(ev.request_id))
        if isinstance(ev, (P.Done, P.Error)):
            got_done.set()

    client = RemoteClient(server, api_key=KEY, on_event=on_event)
    with client:
        client.connect()
        req = P.Generate(request_id="raw1", prompt="Once upon a time", sampling=_greedy(200))
        client.send(req)
        assert got_done.wait(120)
    done = events[-1]
    assert isinstance(done, P.Done), done
    assert done.finish_reason == "cancelled"
    n_tokens = len([e for e in events if isinstance(e, P.Token)])
    assert 2 <= n_tokens < 20  # stopped long before the 200 requested tokens


@pytest.mark.model
def test_cli_chat_against_a_remote_prints_client_side_ttft(server: str) -> None:
    out = subprocess.run([sys.executable, "-m", "app.cli", "chat", "--remote", server, "--api-key", KEY,
                          "--raw", "-n", "8", "--temp", "0", "The capital of France is"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert SOURCE in out.stdout and "TTFT" in out.stdout and "ITL" in out.stdout
    # --raw sends plain text: the CLI must say that no chat template (not even the server's) was applied
    assert "chat template: none (--raw" in out.stderr, out.stderr


@pytest.mark.model
def test_wrong_api_key_is_a_clear_error(server: str) -> None:
    with RemoteClient(server, api_key="wrong") as client:
        with pytest.raises(EngineError, match="refused the API key"):
            client.connect()


@pytest.mark.model
def test_server_killed_mid_reply_is_reported_with_what_arrived(default_model: Path) -> None:
    proc, url = start_server(default_model, api_key=None)
    try:
        got: list[P.Token] = []
        with RemoteClient(url) as client:
            client.connect()
            req = P.Generate(request_id="k1", prompt="Count: one, two, three,", sampling=_greedy(400))
            with pytest.raises(EngineError, match="mid-reply|closed the connection") as info:
                for ev in client.generate(req):
                    if isinstance(ev, P.Token):
                        got.append(ev)
                        if len(got) == 3:
                            proc.kill()
        assert len(got) >= 3
        assert info.value.error.kind in ("generation_failed", "timeout")
    finally:
        proc.kill()
        proc.wait(10)


def test_a_server_that_never_answers_times_out_clearly() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: [accepted.append(listener.accept()[0]) for _ in range(2)], daemon=True).start()
    try:
        client = RemoteClient(f"http://127.0.0.1:{port}", model="m", timeout=1.0)
        with client:
            t0 = time.monotonic()
            with pytest.raises(EngineError, match="did not answer .* within 1 s") as info:
                client.connect()
            # It waited for the timeout rather than failing for some other reason first (an upper bound
            # would measure this machine's load; pytest-timeout catches a hang).
            assert time.monotonic() - t0 >= 0.9
            assert info.value.error.kind == "load_failed"
    finally:
        for s in accepted:
            s.close()
        listener.close()


def test_plain_http_to_another_host_needs_an_explicit_opt_in(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ROOFLINE_ALLOW_INSECURE_HTTP", raising=False)
    with pytest.raises(EngineError, match="Refusing plain http"):
        RemoteClient("http://192.168.1.20:8080").start()
    RemoteClient("https://example.invalid").start()  # https: fine (nothing is sent by start)
    RemoteClient("http://localhost:8080").start()  # loopback: fine
    client = RemoteClient("http://192.168.1.20:8080", allow_insecure_http=True)
    client.start()
    assert "not encrypted" in capsys.readouterr().err and client.warnings
    with pytest.raises(EngineError, match="Not a server URL"):
        RemoteClient("ftp://host/x").start()
    with pytest.raises(EngineError, match="Bad port"):
        RemoteClient("http://127.0.0.1:notaport").start()


class _AuthEcho(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization", ""))
        body = json.dumps({"data": [{"id": "echo-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_keyring_key_is_used_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backend import KeyringBackend

    from app.core.config import secrets

    class Memory(KeyringBackend):
        priority = 1  # type: ignore[assignment]
        store: ClassVar[dict[tuple[str, str], str]] = {}

        def set_password(self, service: str, username: str, password: str) -> None:
            self.store[(service, username)] = password

        def get_password(self, service: str, username: str) -> str | None:
            return self.store.get((service, username))

        def delete_password(self, service: str, username: str) -> None:
            del self.store[(service, username)]

    old = keyring.get_keyring()
    keyring.set_keyring(Memory())
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AuthEcho)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        assert secrets.keyring_available()
        secrets.save_api_key(url + "/v1", "sk-from-keyring")
        assert secrets.load_api_key(url) == "sk-from-keyring"
        assert secrets.load_api_key("http://127.0.0.1:1") is None  # keyed per server
        with RemoteClient(url) as client:
            assert client.connect().model_desc.startswith("echo-model")
        assert _AuthEcho.seen[-1] == "Bearer sk-from-keyring"
        assert secrets.delete_api_key(url) and secrets.load_api_key(url) is None
        assert all("sk-" not in p.read_text(errors="ignore") for p in Path(os.environ["ROOFLINE_HOME"]).rglob("*")
                   if p.is_file())
    finally:
        keyring.set_keyring(old)
        httpd.shutdown()


def test_without_a_keyring_backend_the_key_is_not_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backends import fail

    from app.core.config import secrets

    old = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        assert not secrets.keyring_available()
        with pytest.raises(secrets.SecretStoreUnavailable, match="asked for it each time"):
            secrets.save_api_key("https://api.example.com", "sk-x")
        assert secrets.load_api_key("https://api.example.com") is None
        assert not secrets.delete_api_key("https://api.example.com")
    finally:
        keyring.set_keyring(old)


@pytest.mark.model
def test_grid_sweep_runs_against_the_remote_with_client_side_timings(server: str) -> None:
    from app.core.bench.sweeps import plan, run_sweep
    from app.engine.sweep_backend import RemoteSweepBackend
    from llama_bench_json import read_llama_bench_json

    with RemoteClient(server, api_key=KEY) as client:
        client.connect()
        steps = plan("grid", {"prompts": [8, 48], "gens": [6]}, remote=True)
        result = run_sweep("grid", steps, RemoteSweepBackend(client, warmup=False), 1)
    assert not result.cancelled and len(result.points) == 2
    assert all(c["prefill_ms"] > 0 and c["decode_ms"] > 0 for c in result.points)
    assert result.backend["timing"].startswith("client-side")
    rows = read_llama_bench_json(json.dumps(result.rows()))
    # each cell is one request reported as llama-bench's pp row and tg row (the gaps between the chunks)
    assert sorted((r["n_prompt"], r["n_depth"]) for r in rows) == [(0, 8), (0, 48), (8, 0), (48, 0)]
    assert all(1 <= r["n_gen"] <= 5 for r in rows if not r["n_prompt"])


class _Silent(http.server.BaseHTTPRequestHandler):
    """Lists a model, then holds every POST without a byte of answer until the test lets it go."""

    release: ClassVar[threading.Event]

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.release.wait(60)


def test_cancel_ends_a_request_the_server_has_not_answered_yet() -> None:
    """The cancel shuts the request's socket (captured as it connected), so a read waiting for the answer's
    headers ends at once rather than after the client's timeout (60 s here)."""
    _Silent.release = threading.Event()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    events: list[Any] = []
    finished = threading.Event()

    def on_event(event: Any) -> None:
        events.append(event)
        if isinstance(event, (P.Done, P.Error)):
            finished.set()

    try:
        client = RemoteClient(f"http://127.0.0.1:{server.server_address[1]}", api_key="k", on_event=on_event,
                              timeout=60.0)
        with client:
            client.connect()
            client.send(P.Generate(request_id="r1", prompt="hi", sampling=_greedy(4)))
            time.sleep(0.5)  # the request is sent and waits for the server
            client.send(P.Cancel("r1"))
            assert finished.wait(20), "the cancel did not end the waiting request"
        assert isinstance(events[-1], P.Done) and events[-1].finish_reason == "cancelled", events[-1]
    finally:
        _Silent.release.set()
        server.shutdown()
        server.server_close()
