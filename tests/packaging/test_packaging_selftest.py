"""`roofline --self-test`, and the child-process roles a frozen app starts through its own executable.

A frozen app has no `python -m`: `worker_command()` becomes `[sys.executable, "--engine-worker"]` and the quantizer
`[sys.executable, "--quantize", ...]`. Here a stand-in executable that runs `app.cli.main` plays the frozen
binary, so the dispatch in `app/cli.py` is exercised exactly as the PyInstaller build uses it. The real frozen
folder (scripts/package) is tested too when it has been built.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from synth_gguf import write_synthetic_gguf

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ROOT / "dist" / "roofline" / "roofline"


def _roofline(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.model
def test_self_test_passes_unfrozen(default_model: Path) -> None:
    out = _roofline("--self-test", "--tokens", "4")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines if ln.startswith(("ok", "FAIL"))] == [
        "ok   model", "ok   your chat store", "ok   engine", "ok   chat store", "ok   settings", "ok   gui"]
    assert "4 tokens" in out.stdout and lines[-1] == "self-test passed: 6 checks ok, 0 failed"
    assert "sampler top-k: C" in out.stdout  # the set-up built the C extension


def test_self_test_fails_loudly_on_a_bad_model(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(100))
    out = _roofline("--self-test", "--no-gui", "-m", str(bad))
    assert out.returncode == 1
    assert "FAIL model" in out.stdout and "self-test FAILED" in out.stdout
    missing = _roofline("--self-test", "--no-gui", "-m", str(tmp_path / "none.gguf"))
    assert missing.returncode == 1 and "FAIL model" in missing.stdout


def test_self_test_fails_when_generation_fails(tmp_path: Path) -> None:
    # A header that parses but that llama.cpp cannot build a model from: the engine check must fail.
    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=1)
    data = bytearray(model.read_bytes())
    key = b"llama.embedding_length"
    at = data.find(key) + len(key) + 4
    data[at:at + 4] = (300).to_bytes(4, "little")  # no longer matches the tensors' shapes
    model.write_bytes(bytes(data))
    out = _roofline("--self-test", "--no-gui", "-m", str(model))
    assert out.returncode == 1, out.stdout
    assert "ok   model" in out.stdout and "FAIL engine" in out.stdout


def _fake_frozen(tmp_path: Path) -> Path:
    """An executable that behaves like the frozen app's: its arguments go straight to app.cli.main."""
    exe = tmp_path / "roofline-frozen"
    exe.write_text(f"#!/bin/sh\ncd {ROOT} && exec {sys.executable} -c "
                   f"'import sys; from app.cli import main; sys.exit(main())' \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


_AS_FROZEN = """
import json, sys
sys.frozen = True
sys.executable = sys.argv[1]
from app.engine import protocol as P
from app.engine.client import EngineClient, worker_command
from app.engine.quantize_client import quantize_command
assert worker_command() == [sys.argv[1], "--engine-worker"], worker_command()
with EngineClient() as c:
    loaded = c.load(P.LoadConfig(model_path=sys.argv[2], n_ctx=128, n_threads=1))
    done = list(c.generate(P.Generate(request_id="f", prompt="ab",
                                      sampling=P.Sampling(temperature=0.0, max_tokens=3, ignore_eos=True))))[-1]
print(json.dumps({"ready": c.ready.pid, "arch": loaded.architecture, "tokens": done.metrics["generated_tokens"],
                  "quantize": quantize_command(sys.argv[2], sys.argv[2] + ".q8", "Q8_0")}))
"""


def test_the_frozen_engine_worker_role_serves_the_protocol(tmp_path: Path) -> None:
    exe = _fake_frozen(tmp_path)
    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=1)
    out = subprocess.run([sys.executable, "-c", _AS_FROZEN, str(exe), str(model)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["arch"] == "llama" and facts["tokens"] == 3
    # The quantizer role, started the way the frozen app starts it.
    cmd = facts["quantize"]
    assert cmd[:2] == [str(exe), "--quantize"]
    q = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert q.returncode == 0, q.stdout[-2000:] + q.stderr[-2000:]
    events = [json.loads(line) for line in q.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("event") == "verified" for e in events), events[-3:]
    assert Path(cmd[3]).stat().st_size > 0


def test_frozen_build_self_test() -> None:
    """The PyInstaller folder from scripts/package, run as a user would: elsewhere, fresh home, no source."""
    if not FROZEN.exists():
        pytest.skip("no frozen build: run scripts/package")
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items()
               if k not in ("ROOFLINE_DEFAULT_MODEL", "PYTHONPATH", "VIRTUAL_ENV")}
        env.update(ROOFLINE_HOME=home, QT_QPA_PLATFORM="offscreen")
        out = subprocess.run([str(FROZEN), "--self-test", "--tokens", "4"], cwd=home, env=env,
                             capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "frozen app" in out.stdout and "--engine-worker" in out.stdout
    assert "sampler top-k: C" in out.stdout  # PyInstaller bundled the C extension
    assert "self-test passed: 6 checks ok" in out.stdout


def test_frozen_build_discovers_sub_commands() -> None:
    """Sub-commands are found with pkgutil at run time, which must work inside PyInstaller's archive."""
    if not FROZEN.exists():
        pytest.skip("no frozen build: run scripts/package")
    import pkgutil

    import app.commands

    known = {m.name.replace("_", "-") for m in pkgutil.iter_modules(app.commands.__path__)
             if not m.name.startswith("_")}
    out = subprocess.run([str(FROZEN), "--help"], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr
    listed = {line.split()[0] for line in out.stdout.splitlines()
              if line.startswith("    ") and not line.startswith("     ")}
    # The build is a snapshot: commands added since are missing from it, but all it lists are real ones.
    assert {"chat", "bench", "gui", "info", "pull"} <= listed <= known, (listed, known)
