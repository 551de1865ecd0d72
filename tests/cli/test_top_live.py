"""`roofline chat --remote` and `roofline top --remote` against live servers on the real default model:
`roofline serve` (its own /metrics: llama-server's names plus KV gauges and TTFT/ITL histograms) and, where
scripts/_llama_tools.sh has built it, llama.cpp's llama-server started with --metrics --slots (.ci/run builds it
and sets ROOFLINE_REQUIRE_LLAMA_SERVER=1: there a missing one fails, tests/cli/test_llama_server_guard.py)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from llama_tools import require_llama_server
from served import KEY, Served, serve

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "2048") as s:
        yield s


def _chat(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["chat", "--remote", url, "--api-key", KEY, "-n", "16", "--temp", "0", *extra,
                 "Name three colours."]) == 0
    return capsys.readouterr().out


def test_chat_shows_roofline_serves_own_phases(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    out = _chat(served.url, capsys)
    line = next(x for x in out.splitlines() if x.startswith("server: roofline serve"))
    assert "over the last" in line and "prefill —" not in line and "decode —" not in line
    assert "KV " in line and "%" in line


def test_top_once_reads_roofline_serve(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    _chat(served.url, capsys)
    assert main(["top", "--remote", served.url, "--api-key", KEY, "--once", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["label"] == "roofline serve" and m["running"] == 0 and m["waiting"] == 0
    assert m["ttft"]["count"] >= 1 and m["itl"]["count"] >= 1
    assert m["prefill_tps"] > 0 and m["decode_tps"] > 0
    assert 0 < m["kv_fraction"] <= 1 and m["kv_tokens"] > 0  # the finished chat's prefix stays cached


@pytest.fixture(scope="module")
def llama_server(default_model: Path) -> Iterator[str]:
    binary = require_llama_server()  # a skip without one; a failure where .ci/run built it (llama_tools)
    from llama_server import free_port

    port = free_port()
    proc = subprocess.Popen([str(binary), "-m", str(default_model), "--host", "127.0.0.1", "--port", str(port),
                             "-c", "2048", "-np", "2", "-t", "2", "--metrics", "--slots", "-ngl", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("llama-server did not start") from None
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


def test_llama_server_live(llama_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _chat(llama_server, capsys)
    line = next(x for x in out.splitlines() if x.startswith("server: llama-server"))
    assert "prefill —" not in line and "decode —" not in line
    assert main(["top", "--remote", llama_server, "--api-key", KEY, "--once", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["label"] == "llama-server" and m["prefill_tps"] > 0 and m["decode_tps"] > 0
    assert m["running"] == 0 and m["waiting"] == 0
