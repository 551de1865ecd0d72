"""A local stand-in for the Hugging Face Hub, speaking the endpoints the real `huggingface_hub` client uses.

Endpoints (as read from huggingface_hub 2.4's hf_api.py / file_download.py):
- GET  /api/models?search=&filter=gguf&sort=&limit=&expand=...   model search (list of model dicts)
- GET  /api/models/{repo}[/revision/{rev}]?blobs=true              repo info with siblings (size, lfs.sha256)
- GET  /api/models/{repo}/tree/{rev}[?recursive=true]               tree listing (type, path, size, oid, lfs)
- POST /api/models/{repo}/paths-info/{rev}                          same entries for the given paths
- GET/HEAD /{repo}/resolve/{rev}/{path}                             the file, with Range, ETag, X-Repo-Commit,
                                                                    X-Linked-Size, X-Linked-ETag headers
Faults for tests: drop the connection after N bytes of a file (once), throttle, lie about a sha256, give no
sha256 at all (no `lfs` in listings, a git blob id as ETag, as the hub does for files not in LFS).
Hostile hub for security tests: advertise any string as a file's sha256 (a path, say), send a file body that
never ends (bounded by ENDLESS_LIMIT, and it stops when the client hangs up).
Counters: bytes of file content served per path, and every request line with its Range header.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ENDLESS_LIMIT = 64 << 20  # an "endless" body stops here so a test that fails cannot fill the disk


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


@dataclass
class Repo:
    repo_id: str
    files: dict[str, Path]  # path in repo -> local file
    downloads: int = 0
    likes: int = 0
    last_modified: str = "2025-01-01T00:00:00.000Z"
    tags: list[str] = field(default_factory=lambda: ["gguf"])
    # Header-only demo files (sparse, many GB) are never downloaded: advertise a made-up hash, skip hashing.
    fake_sha: bool = False
    _sha: dict[str, str] = field(default_factory=dict)

    def sha(self, path: str) -> str:
        if self.fake_sha:
            return hashlib.sha256(str(self.files[path]).encode()).hexdigest()
        if path not in self._sha:
            self._sha[path] = sha256_of(self.files[path])
        return self._sha[path]


class HubState:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.bytes_served: dict[str, int] = {}
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self.auth: list[str | None] = []  # Authorization header of each request, in order
        self.drop_after: dict[str, int] = {}  # path in repo -> drop the connection after this many bytes (once)
        self.lie_sha: set[str] = set()  # paths whose advertised sha256 is wrong
        self.throttle_bps: int | None = None  # bytes/s per response
        self.redirect_lfs = False  # resolve answers 302 to /cdn/... as huggingface.co does for LFS files
        self.sha_override: dict[str, str] = {}  # path in repo -> the exact string advertised as its sha256
        self.endless: set[str] = set()  # paths whose body goes on past the listed size (up to ENDLESS_LIMIT)
        self.no_sha: set[str] = set()  # paths listed without lfs and served with a 40-hex (git blob) ETag
        self.lock = threading.Lock()

    def add_repo(self, repo_id: str, files: dict[str, Path], **kw: Any) -> Repo:
        repo = Repo(repo_id, dict(files), **kw)
        self.repos[repo_id] = repo
        return repo

    def advertised_sha(self, repo: Repo, path: str) -> str:
        if path in self.sha_override:
            return self.sha_override[path]
        real = repo.sha(path)
        return hashlib.sha256(real.encode()).hexdigest() if path in self.lie_sha else real

    def served(self, path: str) -> int:
        return self.bytes_served.get(path, 0)


def _entry(state: HubState, repo: Repo, path: str) -> dict[str, Any]:
    size = repo.files[path].stat().st_size
    entry: dict[str, Any] = {"type": "file", "path": path, "size": size, "oid": _blob_id(path)}
    if path not in state.no_sha:
        entry["lfs"] = {"oid": state.advertised_sha(repo, path), "size": size, "pointerSize": 134}
    return entry


def _blob_id(path: str) -> str:
    return hashlib.sha1(path.encode()).hexdigest()


def _model_dict(state: HubState, repo: Repo, blobs: bool) -> dict[str, Any]:
    siblings = []
    for path in repo.files:
        sib: dict[str, Any] = {"rfilename": path}
        if blobs:
            size = repo.files[path].stat().st_size
            sib.update(size=size, blobId=_blob_id(path))
            if path not in state.no_sha:
                sib["lfs"] = {"sha256": state.advertised_sha(repo, path), "size": size, "pointerSize": 134}
        siblings.append(sib)
    total = sum(p.stat().st_size for p in repo.files.values())
    return {"_id": repo.repo_id, "id": repo.repo_id, "modelId": repo.repo_id, "sha": COMMIT,
            "downloads": repo.downloads, "likes": repo.likes, "lastModified": repo.last_modified,
            "tags": repo.tags, "private": False, "siblings": siblings,
            "gguf": {"total": total, "architecture": "gemma3", "context_length": 32768}}


class Handler(BaseHTTPRequestHandler):
    server: HubHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # ------------------------------------------------------------ plumbing
    def _json(self, data: Any, status: int = 200) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _not_found(self, what: str) -> None:
        self.send_response(404)
        body = json.dumps({"error": f"{what} not found"}).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _find_repo(self, rest: str) -> tuple[Repo, str] | None:
        for repo_id, repo in self.server.state.repos.items():
            if rest == repo_id or rest.startswith(repo_id + "/"):
                return repo, rest[len(repo_id):].lstrip("/")
        return None

    def _record(self) -> None:
        with self.server.state.lock:
            self.server.state.requests.append((self.command, self.path, self.headers.get("Range")))
            self.server.state.auth.append(self.headers.get("Authorization"))

    # ------------------------------------------------------------ verbs
    def do_HEAD(self) -> None:
        self._record()
        self._route()

    def do_GET(self) -> None:
        self._record()
        self._route()

    def do_POST(self) -> None:
        self._record()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path.startswith("/api/models/") and "/paths-info/" in path:
            found = self._find_repo(path[len("/api/models/"):])
            if not found:
                return self._not_found("repo")
            repo, _ = found
            wanted = parse_qs(body).get("paths", [])
            return self._json([_entry(self.server.state, repo, p) for p in wanted if p in repo.files])
        self._not_found(path)

    def _route(self) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        path = unquote(url.path)
        if path == "/":
            return self._json({"ok": True})
        if path == "/api/models":
            return self._search(query)
        if path.startswith("/api/models/"):
            found = self._find_repo(path[len("/api/models/"):])
            if not found:
                return self._not_found("repo")
            repo, tail = found
            if tail.startswith("tree/"):
                return self._json([_entry(state, repo, p) for p in repo.files])
            if tail == "" or tail.startswith("revision/"):
                return self._json(_model_dict(state, repo, blobs="true" in query.get("blobs", [])))
            return self._not_found(path)
        if path.startswith("/cdn/"):  # where LFS files live when the hub redirects (like its CDN)
            found = self._find_repo(path[len("/cdn/"):])
            if found and found[1] in found[0].files:
                return self._serve_file(found[0], found[1])
            return self._not_found(path)
        found = self._find_repo(path.lstrip("/"))
        if found and found[1].startswith("resolve/"):
            repo, tail = found
            _rev, _, file_path = tail[len("resolve/"):].partition("/")
            if file_path in repo.files:
                if state.redirect_lfs and file_path not in state.no_sha:  # only LFS files live on the CDN
                    return self._redirect(repo, file_path)
                return self._serve_file(repo, file_path)
        self._not_found(path)

    def _redirect(self, repo: Repo, file_path: str) -> None:
        """What huggingface.co does for LFS files: 302 to the CDN, the file's facts in X-Linked-* headers."""
        from urllib.parse import quote

        sha = self.server.state.advertised_sha(repo, file_path)
        self.send_response(302)
        self.send_header("Location", f"/cdn/{repo.repo_id}/{quote(file_path)}")
        self.send_header("X-Linked-ETag", f'"{sha}"')
        self.send_header("X-Linked-Size", str(repo.files[file_path].stat().st_size))
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"pointer-etag"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _search(self, query: dict[str, list[str]]) -> None:
        state = self.server.state
        text = (query.get("search") or [""])[0].lower()
        filters = query.get("filter", [])
        repos = [r for r in state.repos.values() if text in r.repo_id.lower()
                 and all(f in r.tags for f in filters)]
        sort = (query.get("sort") or ["downloads"])[0]
        key = {"downloads": lambda r: r.downloads, "likes": lambda r: r.likes,
               "lastModified": lambda r: r.last_modified}.get(sort, lambda r: r.downloads)
        repos.sort(key=key, reverse=True)
        limit = int((query.get("limit") or ["1000"])[0])
        out = []
        for r in repos[:limit]:
            d = _model_dict(state, r, blobs=False)
            d.pop("siblings")
            out.append(d)
        self._json(out)

    def _serve_endless(self, file_path: str) -> None:
        """The file's bytes, then zeros without end (no Content-Length): a hub that never stops sending."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        block = b"\0" * (64 * 1024)
        sent = 0
        try:
            while sent < ENDLESS_LIMIT:
                self._write(file_path, block)
                sent += len(block)
        except OSError:  # the client hung up: what a careful client does
            return

    def _serve_file(self, repo: Repo, file_path: str) -> None:
        state = self.server.state
        if file_path in state.endless and self.command == "GET":
            return self._serve_endless(file_path)
        local = repo.files[file_path]
        size = local.stat().st_size
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        status = 200
        if rng and rng.startswith("bytes="):
            a, _, b = rng[len("bytes="):].partition("-")
            start = int(a) if a else max(0, size - int(b))
            end = min(int(b), size - 1) if (a and b) else size - 1
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        length = end - start + 1
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        if file_path in state.no_sha:  # a file outside LFS: its ETag is the git blob id, no sha256 anywhere
            self.send_header("ETag", f'"{_blob_id(file_path)}"')
        else:
            sha = state.advertised_sha(repo, file_path)
            self.send_header("ETag", f'"{sha}"')
            self.send_header("X-Linked-ETag", f'"{sha}"')
            self.send_header("X-Linked-Size", str(size))
        self.send_header("X-Repo-Commit", COMMIT)
        self.end_headers()
        if self.command == "HEAD":
            return
        drop = state.drop_after.get(file_path)
        sent = 0
        t0 = time.monotonic()
        with local.open("rb") as fh:
            fh.seek(start)
            remaining = length
            while remaining > 0:
                chunk = fh.read(min(64 * 1024, remaining))
                if not chunk:
                    break
                pos = start + sent
                if drop is not None and pos < drop < pos + len(chunk) + 1 and start < drop:
                    chunk = chunk[: drop - pos]
                    self._write(file_path, chunk)
                    state.drop_after.pop(file_path, None)
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                try:
                    self._write(file_path, chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                sent += len(chunk)
                remaining -= len(chunk)
                if state.throttle_bps:
                    ahead = sent / state.throttle_bps - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)

    def _write(self, file_path: str, chunk: bytes) -> None:
        self.wfile.write(chunk)
        with self.server.state.lock:
            self.server.state.bytes_served[file_path] = self.server.state.bytes_served.get(file_path, 0) + len(chunk)


class HubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = state

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class HubServer:
    """Context manager: start the server in a thread, stop it on exit."""

    def __init__(self, state: HubState | None = None) -> None:
        self.state = state or HubState()
        self.httpd = HubHTTPServer(self.state)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return self.httpd.url

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def unused_loopback_url() -> str:
    """An http://127.0.0.1 address nothing listens on (to test 'unreachable')."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def main() -> None:  # `python tests/helpers/hubserver.py FILE...` serves files as repo test/model for manual checks
    import sys

    state = HubState()
    state.add_repo("test/model", {Path(p).name: Path(p) for p in sys.argv[1:]})
    with HubServer(state) as srv:
        print(srv.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------- pytest fixtures
# (tests/conftest.py loads this module as a plugin)

try:
    import pytest
except ImportError:  # pragma: no cover - the module also runs standalone
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def hub_server(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
        """A running local hub; HF_ENDPOINT points at it, offline mode and tokens are cleared."""
        with HubServer() as srv:
            monkeypatch.setenv("HF_ENDPOINT", srv.url)
            monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
            monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
            monkeypatch.setenv("HF_TOKEN", "hf_test_token")
            yield srv
