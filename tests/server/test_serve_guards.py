"""The Host and Origin allowlists (app.server.guards), over the real application on uvicorn without a model:
a DNS-rebound Host and a cross-origin "simple" POST are refused before any route runs; an allowed origin
gets CORS headers and its preflight answered; /health names no path."""

from __future__ import annotations

import json

import pytest

from app.server.guards import allowed_hosts, host_name, is_wildcard
from app_server import StubHub, app_server
from reliability_plugin import record

CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()


def test_a_foreign_host_is_refused_and_loopback_names_are_served() -> None:
    with app_server() as srv:
        status, _, body = srv.request("GET", "/health", headers={"Host": "evil.example:8080"})
        assert status == 403 and json.loads(body)["error"]["code"] == "host_not_allowed"
        status, _, _ = srv.request("POST", "/v1/chat/completions", CHAT, {"Host": "evil.example"})
        assert status == 403 and srv.hub.opened == []
        record("hostile inputs refused", 2)
        for host in (f"127.0.0.1:{srv.port}", "localhost", "[::1]:8080", "LOCALHOST."):
            assert srv.request("GET", "/health", headers={"Host": host})[0] == 200, host


def test_a_cross_origin_simple_post_is_refused_before_it_is_read() -> None:
    with app_server() as srv:
        status, headers, body = srv.request("POST", "/v1/completions", b'{"prompt": "x"}',
                                            {"Content-Type": "text/plain", "Origin": "http://evil.example"})
        assert status == 403 and json.loads(body)["error"]["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in headers and srv.hub.opened == []
        # a preflight from it gets no CORS answer either
        status, headers, _ = srv.request("OPTIONS", "/v1/completions", headers={
            "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
        assert status == 403 and "access-control-allow-origin" not in headers
        record("hostile inputs refused", 2)


def test_an_allowed_origin_gets_cors_and_its_preflight() -> None:
    with app_server(origins=("http://localhost:3000",)) as srv:
        status, headers, _ = srv.request("OPTIONS", "/v1/chat/completions", headers={
            "Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert status == 204 and headers["access-control-allow-origin"] == "http://localhost:3000"
        assert "authorization" in headers["access-control-allow-headers"]
        status, headers, _ = srv.request("POST", "/v1/chat/completions", CHAT, {
            "Origin": "http://localhost:3000", "Content-Type": "application/json"})
        assert status == 503 and len(srv.hub.opened) == 1  # it reached the (stub) engine
        assert headers["access-control-allow-origin"] == "http://localhost:3000" and headers["vary"] == "Origin"
        assert srv.request("GET", "/health", headers={"Origin": "http://localhost:3001"})[0] == 403


def test_allowed_hosts_are_loopback_the_listening_address_and_the_extras() -> None:
    assert host_name("[::1]:8080") == "::1" and host_name("Example.COM.:80") == "example.com"
    assert host_name("::1") == "::1"
    hosts = allowed_hosts("192.168.1.5", ["my-box.lan"])
    assert {"localhost", "127.0.0.1", "::1", "192.168.1.5", "my-box.lan"} <= hosts
    assert "evil.example" not in hosts and "0.0.0.0" not in hosts
    assert "127.0.0.1" in allowed_hosts("0.0.0.0")  # a wildcard: this machine's own names and addresses
    assert all(map(is_wildcard, ("0.0.0.0", "::", "", "0:0::0"))) and not any(
        map(is_wildcard, ("192.168.1.5", "::1", "my-box.lan")))


@pytest.mark.parametrize("ready", [True, False])
def test_health_names_no_path(ready: bool) -> None:
    hub = StubHub(ready=ready, restart_error="The engine could not be restarted: /home/someone/models/x.gguf")
    with app_server(hub) as srv:
        status, _, body = srv.request("GET", "/health")
        assert status == (200 if ready else 503)
        assert b"/home" not in body and b"gguf" not in body
        if not ready:
            assert json.loads(body) == {"status": "unavailable", "error": "engine restart failed, retrying"}


def test_deep_json_is_one_400_line() -> None:
    with app_server() as srv:
        status, _, body = srv.request("POST", "/v1/completions", b"[" * 100_000 + b"]" * 100_000)
        error = json.loads(body)["error"]
        assert status == 400 and "400 deep" in error["message"] and srv.hub.opened == []
        record("hostile inputs refused")
