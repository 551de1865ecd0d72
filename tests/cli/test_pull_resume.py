"""`roofline pull` end to end against the local hub: download + verify + register, and a killed run resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core.config import paths
from app.core.hub import downloads
from app.core.models import library
from hubserver import HubServer, sha256_of
from synth_gguf import write_synthetic_gguf

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


@pytest.fixture
def repo_file(hub_server: HubServer, tmp_path: Path) -> Path:
    src = write_synthetic_gguf(tmp_path / "src.gguf", tensor_type="F32", n_layers=4)  # ~9 MB
    hub_server.state.add_repo("acme/Tiny-GGUF", {"Tiny-F32.gguf": src})
    return src


def test_pull_downloads_verifies_and_registers(hub_server: HubServer, repo_file: Path) -> None:
    r = subprocess.run(_cli("pull", "acme/Tiny-GGUF:F32", "--json"), cwd=ROOT, env=os.environ.copy(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    path = Path(out["path"])
    assert sha256_of(path) == sha256_of(repo_file)
    entry = library.find(path)
    assert entry is not None and entry.broken is None and entry.source == "library"
    assert entry.provenance["repo_id"] == "acme/Tiny-GGUF"
    listed = subprocess.run(_cli("models", "--json"), cwd=ROOT, env=os.environ.copy(), capture_output=True,
                            text=True, timeout=60)
    assert str(path) in [m["path"] for m in json.loads(listed.stdout)]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_pull_resumes_on_rerun(hub_server: HubServer, repo_file: Path, sig: signal.Signals) -> None:
    size = repo_file.stat().st_size
    hub_server.state.throttle_bps = 2 << 20  # ~4 s for the file: time to kill it midway
    dest = downloads.destination(paths.models_dir(), "acme/Tiny-GGUF", "Tiny-F32.gguf")
    part = downloads.part_path(dest)
    proc = subprocess.Popen(_cli("pull", "acme/Tiny-GGUF:F32"), cwd=ROOT, env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while (not part.exists() or part.stat().st_size < size // 4) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "run the same command to resume" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    kept = part.stat().st_size
    assert size // 4 <= kept < size and not dest.exists()

    hub_server.state.throttle_bps = None
    served_before = _settled(hub_server, "Tiny-F32.gguf")  # the killed run's handler notices, stops
    n_requests = len(hub_server.state.requests)
    r = subprocess.run(_cli("pull", "acme/Tiny-GGUF:F32", "--json"), cwd=ROOT, env=os.environ.copy(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resumed_from"] == kept
    # The rerun asked for, and got, only the bytes after the kept part.
    gets = [rng for m, p, rng in hub_server.state.requests[n_requests:] if m == "GET" and "resolve" in p]
    assert gets == [f"bytes={kept}-"]
    assert hub_server.state.served("Tiny-F32.gguf") - served_before == size - kept
    assert sha256_of(dest) == sha256_of(repo_file)
    assert not part.exists()


def test_pull_unknown_quant_lists_what_exists(hub_server: HubServer, repo_file: Path) -> None:
    r = subprocess.run(_cli("pull", "acme/Tiny-GGUF:Q2_K"), cwd=ROOT, env=os.environ.copy(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "has no Q2_K" in r.stderr and "F32" in r.stderr


def test_pull_offline_is_a_message_not_a_traceback(hub_server: HubServer, repo_file: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    r = subprocess.run(_cli("pull", "acme/Tiny-GGUF:F32"), cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "offline mode" in r.stderr and "Traceback" not in r.stderr


def _settled(srv: HubServer, path: str) -> int:
    """Bytes served once the server has stopped sending to a dead client."""
    last, stable_since = -1, time.monotonic()
    while time.monotonic() - stable_since < 0.5:
        now = srv.state.served(path)
        if now != last:
            last, stable_since = now, time.monotonic()
        time.sleep(0.05)
    return last


def test_pull_without_quant_takes_the_recommended_one(hub_server: HubServer, tmp_path: Path) -> None:
    from app.core.gguf import remote_header as remote_gguf
    from app.core.hub import listing as hub

    f32 = write_synthetic_gguf(tmp_path / "f32.gguf", tensor_type="F32", n_layers=2)
    q8 = write_synthetic_gguf(tmp_path / "q8.gguf", tensor_type="Q8_0", n_layers=2)
    q4 = write_synthetic_gguf(tmp_path / "q4.gguf", tensor_type="Q4_0", n_layers=2)
    hub_server.state.add_repo("acme/Three-GGUF", {"T-F32.gguf": f32, "T-Q8_0.gguf": q8, "T-Q4_0.gguf": q4})
    rows = remote_gguf.assess_repo(hub.list_variants("acme/Three-GGUF"))  # also caches this machine's bandwidth
    (best,) = [r for r in rows if r.recommended]
    r = subprocess.run(_cli("pull", "acme/Three-GGUF", "--json"), cwd=ROOT, env=os.environ.copy(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "recommended for this machine" in r.stderr
    assert json.loads(r.stdout)["quant"] == best.quant


def test_ctrl_c_asks_the_download_to_stop_and_a_second_one_interrupts() -> None:
    from app.commands.pull import _ctrl_c_stops

    control = downloads.Control()
    before = signal.getsignal(signal.SIGINT)
    with _ctrl_c_stops(control):
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, in the main thread, at the next bytecode
        time.sleep(0.01)
        assert control.stop.is_set() and control.reason == "paused"  # asked to stop; nothing raised
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
    assert signal.getsignal(signal.SIGINT) is before
