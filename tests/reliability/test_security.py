"""Security defaults: hub traffic over https only (redirects included), nothing listens beyond loopback, API keys
live in the OS keyring and never in a file of ours."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.core.config import paths
from app.core.hub import listing as hub
from connect_log import record_connect_attempts
from reliability_plugin import record

ROOT = Path(__file__).resolve().parents[2]
UNROUTABLE = "http://203.0.113.7"  # TEST-NET-3: following this redirect would hang until a timeout


@pytest.mark.parametrize("url,allowed", [
    ("https://huggingface.co", True),
    ("https://hf-mirror.example.org/api", True),
    ("http://127.0.0.1:8080", True),
    ("http://localhost:1234", True),
    ("http://[::1]:9000", True),
    ("http://huggingface.co", False),
    ("http://192.168.1.10:8080", False),
    ("http://127.0.0.1.evil.example", False),
    ("ftp://huggingface.co", False),
    ("file:///etc/passwd", False),
])
def test_only_https_or_loopback_is_allowed(url: str, allowed: bool) -> None:
    if allowed:
        hub.check_url_allowed(url)
    else:
        with pytest.raises(hub.HubInsecure, match="must use https"):
            hub.check_url_allowed(url)
        record("hostile inputs refused")


def test_a_plain_http_endpoint_is_refused_before_any_traffic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.example.com")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    attempts = record_connect_attempts(monkeypatch)
    with pytest.raises(hub.HubInsecure):
        hub.search("gemma")
    with pytest.raises(hub.HubInsecure):
        hub.list_variants("acme/model")
    assert attempts == []  # refused up front: not even the host name was looked up


class _Redirector(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _redirect(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(302)
        self.send_header("Location", UNROUTABLE + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = _redirect
    do_HEAD = _redirect


@pytest.fixture
def redirector() -> Iterator[str]:
    _Redirector.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_hub_api_refuses_a_redirect_to_plain_http(redirector: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", redirector)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    attempts = record_connect_attempts(monkeypatch)
    with pytest.raises(hub.HubInsecure, match="203.0.113.7"):
        hub.search("gemma")
    # refused, not followed: the plain-http target was never contacted (only the redirector was)
    assert attempts and all(host == "127.0.0.1" for host, _ in attempts), attempts
    assert any(p.startswith("/api/models") for p in _Redirector.hits)
    record("hostile inputs refused")


def test_downloads_refuse_a_redirect_to_plain_http(redirector: str) -> None:
    from app.core.hub.downloads import http_client

    with http_client() as client, pytest.raises(hub.HubInsecure, match="203.0.113.7"):
        client.get(redirector + "/acme/model/resolve/main/model.gguf")
    record("hostile inputs refused")


def test_nothing_in_the_app_listens_beyond_loopback() -> None:
    """No module binds a wildcard address; a local API, when one exists, must default to 127.0.0.1."""
    wildcard = re.compile(r"""0\.0\.0\.0|INADDR_ANY|\.bind\(\(\s*['"]{2}|host\s*=\s*['"]{2}|['"]::['"]""")
    offenders = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if wildcard.search(line) and not line.lstrip().startswith("#"):
                offenders.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_api_keys_go_to_the_keyring_and_never_into_our_files(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backend import KeyringBackend

    from app.core.config import secrets
    from app.core.config.settings import load_settings, save_settings

    class Memory(KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.store: dict[tuple[str, str], str] = {}

        def set_password(self, service: str, username: str, password: str) -> None:
            self.store[(service, username)] = password

        def get_password(self, service: str, username: str) -> str | None:
            return self.store.get((service, username))

        def delete_password(self, service: str, username: str) -> None:
            self.store.pop((service, username), None)

    backend = Memory()
    old = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        key = "sk-reliability-" + "7" * 24
        secrets.save_api_key("https://api.example.com/v1", key)
        result = load_settings()
        save_settings(result.settings)
        assert list(backend.store.values()) == [key]
        assert secrets.load_api_key("https://api.example.com") == key
        assert secrets.load_api_key("https://api.example.com.evil.org") is None
        # No file we write (settings, caches, databases) holds the key.
        home = paths.data_dir().parent
        leaks = [p for p in home.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
        assert not leaks
        assert not any("key" in name or "token" in name or "secret" in name
                       for name in type(result.settings).model_fields)
    finally:
        keyring.set_keyring(old)
