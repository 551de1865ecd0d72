"""A hostile OpenAI-compatible server and hostile text on the terminal; how API keys reach the CLI; the
permissions of the files we write.

- Remote bodies are read with bounds: an endless /v1/models body or an endless streamed line is cut off.
- Text from servers and files is printed without its terminal escape sequences (no retitled terminal,
  cleared screen or `\\r`-overwritten line), the text itself kept.
- `--api-key` need not be on the command line (where `ps` shows it): ROOFLINE_API_KEY or a prompt.
- settings.json is created readable by its owner only.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_openai import ESCAPES, HostileState, hostile_server  # noqa: F401 (fixture)
from reliability_plugin import hostile_tried, record
from synth_gguf import write_synthetic_gguf

from app.engine import protocol as P
from app.engine.client import EngineError
from app.engine.remote.backend import MAX_JSON_BYTES, RemoteClient

ROOT = Path(__file__).resolve().parents[1]
BAD = ("\x1b", "\x07", "\x9b", "\r")


def _cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
         state: HostileState | None = None) -> subprocess.CompletedProcess[str]:
    # Bytes, not text mode: text mode would turn a `\r` into `\n` and hide it.
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", *args], cwd=ROOT,
                            env=dict(os.environ, **(env or {})), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if state is not None:
        state.watch_pid = proc.pid
    out, err = proc.communicate(stdin.encode() if stdin else None, timeout=180)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


# ---------------------------------------------------------------------------------------------- finding 11


def test_an_endless_model_list_is_cut_off(hostile_server: tuple[str, HostileState]) -> None:
    url, state = hostile_server
    state.endless_models = True
    with pytest.raises(EngineError, match="larger than") as err:
        RemoteClient(url, api_key="k").connect()
    assert "\n" not in str(err.value)
    assert state.sent < MAX_JSON_BYTES + (16 << 20)  # the old client read all 256 MiB it was sent
    record("hostile inputs refused")


def test_an_endless_streamed_line_is_cut_off(hostile_server: tuple[str, HostileState]) -> None:
    url, state = hostile_server
    state.endless_line = True
    client = RemoteClient(url, api_key="k", model="m")
    with pytest.raises(EngineError, match="more than a reply can hold"):
        client.collect(P.Generate(request_id="r", messages=[{"role": "user", "content": "hi"}]))
    assert state.sent < (32 << 20)
    record("hostile inputs refused")


def test_a_streamed_reply_that_is_not_server_sent_events_is_refused(
        hostile_server: tuple[str, HostileState]) -> None:
    """A 200 answer to a stream request in another content type (a server ignoring `stream`) is named for
    what it is, and its body is never parsed, rather than read as an empty reply."""
    url, state = hostile_server
    state.stream_content_type = "application/json"
    client = RemoteClient(url, api_key="k", model="m")
    with pytest.raises(EngineError, match="'application/json', not a stream of server-sent events"):
        client.collect(P.Generate(request_id="r", messages=[{"role": "user", "content": "hi"}]))
    record("hostile inputs refused")


# ---------------------------------------------------------------------------------------------- finding 9


def test_escape_sequences_from_a_server_never_reach_the_terminal(hostile_server: tuple[str, HostileState]) -> None:
    url, state = hostile_server
    state.model_id = f"model{ESCAPES}"
    state.tokens = ["Hi", ESCAPES, " there\n", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\"]
    proc = _cli("chat", "--remote", url, "--api-key", "k", "hello")
    assert proc.returncode == 0, proc.stderr
    for text in (proc.stdout, proc.stderr):
        assert not any(c in text for c in BAD), repr(text)
    assert "Hi" in proc.stdout and "EVIL" in proc.stdout and " there\n" in proc.stdout and "link" in proc.stdout
    assert "model" in proc.stderr
    hostile_tried(2)


def test_escape_sequences_in_a_model_file_never_reach_the_terminal(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=1, name=f"Nice{ESCAPES}Model")
    proc = _cli("info", "-m", str(model))
    assert proc.returncode == 0, proc.stderr
    assert not any(c in proc.stdout for c in BAD), repr(proc.stdout)
    assert "Nice" in proc.stdout and "Model" in proc.stdout
    hostile_tried()


def test_clean_text_keeps_text_and_drops_every_kind_of_escape() -> None:
    from app.core.files.untrusted import clean_line, clean_text

    assert clean_text("a\x1b[2Jb\x1b]0;title\x07c\x1b]8;;http://x\x1b\\d\re\tf\ng\x9b2Jh\x00\x7f") == "abcde\tf\ngh"
    assert clean_line("one\ntwo\tthree\x1bP+q\x1b\\") == "one two three"
    assert clean_text("café 日本 ✓ ▁tokens") == "café 日本 ✓ ▁tokens"
    assert clean_line("x" * 50, 10) == "x" * 9 + "…"


# ---------------------------------------------------------------------------------------------- finding 10


def test_the_api_key_can_come_from_the_environment_not_argv(hostile_server: tuple[str, HostileState]) -> None:
    url, state = hostile_server
    key = "sk-from-env-" + "5" * 20
    proc = _cli("chat", "--remote", url, "hello", env={"ROOFLINE_API_KEY": key}, state=state)
    assert proc.returncode == 0, proc.stderr
    assert state.auth and all(a == f"Bearer {key}" for a in state.auth)
    assert state.cmdlines and not any(key in c for c in state.cmdlines)  # what `ps` showed meanwhile
    assert key not in proc.stdout + proc.stderr


def test_the_api_key_can_be_typed_at_a_prompt(hostile_server: tuple[str, HostileState]) -> None:
    url, state = hostile_server
    key = "sk-typed-" + "6" * 20
    proc = _cli("chat", "--remote", url, "--api-key", "-", "hello", stdin=key + "\n", state=state,
                env={"ROOFLINE_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr
    assert state.auth and all(a == f"Bearer {key}" for a in state.auth)
    assert not any(key in c for c in state.cmdlines)
    assert key not in proc.stdout


def test_help_says_where_the_key_can_come_from() -> None:
    proc = _cli("chat", "--help")
    assert "ROOFLINE_API_KEY" in proc.stdout and "prompts" in proc.stdout


# ---------------------------------------------------------------------------------------------- settings


def test_settings_are_created_readable_by_the_owner_only() -> None:
    from app.core.config.settings import Settings, save_settings, settings_path

    old = os.umask(0o022)
    try:
        settings_path().parent.mkdir(parents=True, exist_ok=True)
        path = save_settings(Settings())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.chmod(0o644)  # a file from an older version is tightened at the next save
        save_settings(Settings())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(old)
