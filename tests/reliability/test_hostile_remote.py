"""A hostile OpenAI-compatible server and hostile text on the terminal; how API keys reach the CLI; the
permissions of the files we write.

- Remote bodies are read with bounds: an endless /v1/models body or an endless streamed line is cut off, and
  a reply (answer and reasoning together) stops at MAX_REPLY_BYTES, the text before kept.
- A server's numbers (usage, timings, a model's meta) are used only when plausible; the others get a note.
- Text from servers and files is printed without its terminal escape sequences (no retitled terminal,
  cleared screen or `\\r`-overwritten line), the text itself kept.
- `--api-key` need not be on the command line (where `ps` shows it): ROOFLINE_API_KEY or a prompt.
- settings.json is created readable by its owner only.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.engine import protocol as P
from app.engine.client import EngineError
from app.engine.remote.backend import MAX_JSON_BYTES, MAX_REPLY_BYTES, RemoteClient
from hostile_openai import ESCAPES, HostileState
from reliability_plugin import hostile_tried, record
from synth_gguf import write_synthetic_gguf

ROOT = Path(__file__).resolve().parents[2]
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


# ------------------------------------------------------------------- second probe: a reply's total size


def _chat_in_process(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["chat", "--remote", url, "--api-key", "k", *extra, "hello"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("field", ["content", "reasoning_content"])
def test_a_flood_of_large_events_stops_at_the_reply_cap(hostile_server: tuple[str, HostileState],
                                                        field: str) -> None:
    """3,000 events of 1 MB each (3 GB, once all held by the client) end the reply at MAX_REPLY_BYTES with one
    line; the text before the cap is kept and the connection is closed."""
    url, state = hostile_server
    state.flood = field
    kept: list[P.Token] = []
    client = RemoteClient(url, api_key="k", model="m")
    with pytest.raises(EngineError, match="more than 8 MiB of reply text") as err:
        kept.extend(client.generate(P.Generate(request_id="r", messages=[{"role": "user", "content": "hi"}])))
    assert "\n" not in str(err.value) and err.value.error.kind == "generation_failed"
    answer = "".join(t.text for t in kept)
    reasoning = "".join(t.reasoning for t in kept)
    size = len(answer.encode()) + len(reasoning.encode())
    assert MAX_REPLY_BYTES - state.flood_size < size <= MAX_REPLY_BYTES  # all that fits, no more
    assert (reasoning if field == "reasoning_content" else answer) == "A" * size
    assert state.hung_up.wait(30)  # the client closed the stream rather than read (or hold) the rest
    assert state.sent < MAX_REPLY_BYTES + (64 << 20)  # what the socket buffers hold, not 3 GB
    record("hostile inputs refused")


def test_the_cli_stops_a_flooded_reply_with_one_line_and_keeps_its_text(
        hostile_server: tuple[str, HostileState], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = hostile_server
    state.flood = "content"
    code, out, err = _chat_in_process(url, capsys)
    assert code == 1
    assert out.startswith("A" * 1000) and MAX_REPLY_BYTES - state.flood_size < len(out) <= MAX_REPLY_BYTES
    assert "more than 8 MiB of reply text" in err and "internal error" not in err
    assert err.count("reply text") == 1 and "Traceback" not in err
    assert state.hung_up.wait(30)
    record("hostile inputs refused")


# ------------------------------------------------------------------- second probe: the server's numbers

DIGITS_5000 = "1" * 5000  # past the 4,300 digits Python's int() accepts from text
HOSTILE_NUMBERS = ["[1]", "1e400", "-5", "1e300", '"5"', "true", "false", "1.5", '{"n": 1}', DIGITS_5000,
                   "[" * 5000 + "]" * 5000]


def _last_chunk(value: str) -> str:
    """The last chunk with `value`, as JSON text, for every count in `usage` (JSON text: 1e400 has no float)."""
    usage = (f'"prompt_tokens": {value}, "completion_tokens": {value}, "total_tokens": {value}, '
             f'"completion_tokens_details": {{"reasoning_tokens": {value}}}')
    return f'{{"choices": [{{"delta": {{}}, "finish_reason": "stop"}}], "usage": {{{usage}}}}}'


@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=lambda v: v[:12])
def test_hostile_usage_numbers_are_noted_and_replaced_by_our_own_count(
        hostile_server: tuple[str, HostileState], capsys: pytest.CaptureFixture[str], value: str) -> None:
    """Each count in `usage` that is not a plausible token count is left out with a one-line note (the reply's
    token count then ours: its chunks); the reply is never lost and no such value is printed as a count."""
    url, state = hostile_server
    state.last_chunk = _last_chunk(value)
    code, out, err = _chat_in_process(url, capsys)
    assert code == 0, err
    assert "internal error" not in out + err and "Traceback" not in out + err
    assert out.startswith("Hello, world")
    summary = [line for line in out.splitlines() if line.startswith(("prompt  :", "decode  :"))]
    assert summary[0] == "prompt  : not reported by the server"
    assert summary[1].startswith("decode  : 1 tok in ")  # our count: 2 chunks, 1 decode step
    notes = [line for line in out.splitlines() if line.startswith("note    :")]
    if value.startswith("[["):  # nested past what JSON's parser follows: the chunk is skipped, counts unknown
        assert notes == []
    else:
        assert len(notes) == 4 and all("is not a token count: ignored" in n and len(n) < 160 for n in notes)
        assert "usage.completion_tokens" in notes[1] and "2 chunks counted instead" in notes[1]
    hostile_tried()


@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=lambda v: v[:12])
def test_hostile_usage_numbers_never_reach_the_json_output(
        hostile_server: tuple[str, HostileState], capsys: pytest.CaptureFixture[str], value: str) -> None:
    url, state = hostile_server
    state.last_chunk = _last_chunk(value)
    code, out, err = _chat_in_process(url, capsys, "--json")
    assert code == 0, err

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in the JSON output")

    data = json.loads(out, parse_constant=refuse)  # no Infinity or NaN
    assert data["text"] == "Hello, world" and data["metrics"]["usage"] == {}
    assert data["metrics"]["generated_tokens"] == 2 and data["metrics"]["prompt_tokens"] == 0
    hostile_tried()


@pytest.mark.parametrize("timings, shown", [
    # the prompt's time so small that its rate is absurd, the other numbers not numbers at all
    ({"prompt_n": 40, "prompt_ms": 1e-300, "predicted_n": "11", "predicted_ms": -5, "cache_n": [1]}, 5),
    ({"prompt_n": 1e300, "prompt_ms": 80.0, "predicted_n": 11, "predicted_ms": 1e-300}, 3),
    ({"prompt_n": 40, "prompt_ms": 80.0, "predicted_n": 1e300, "predicted_ms": True, "cache_n": -5}, 3),
])
def test_hostile_timings_are_noted_and_never_printed(hostile_server: tuple[str, HostileState],
                                                      capsys: pytest.CaptureFixture[str],
                                                      timings: dict[str, Any], shown: int) -> None:
    url, state = hostile_server
    state.last_chunk = json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}], "timings": timings,
                                   "usage": {"prompt_tokens": 40, "completion_tokens": 2}})
    code, out, err = _chat_in_process(url, capsys)
    assert code == 0, err
    summary = [line for line in out.splitlines() if line[:8].strip() in ("prefill", "decode", "prompt")]
    assert summary and not any(bad in line for line in summary for bad in ("e+", "-5", "inf", "nan"))
    assert all(len(line) < 200 for line in summary)
    notes = [line for line in out.splitlines() if line.startswith("note    : the server's timings")]
    assert len(notes) == shown, notes
    if timings["prompt_ms"] == 80.0 and timings["prompt_n"] == 40:  # a usable prefill: the server's own
        assert "prefill : 40 tok in 80.0 ms = 500.0 tok/s" in out
    hostile_tried()


def test_a_model_list_with_hostile_numbers_connects_with_notes(hostile_server: tuple[str, HostileState],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    url, state = hostile_server
    state.models_json = ('{"data": [7, {"id": "m", "meta": {"n_ctx": [1], "n_ctx_train": 1e400, "n_vocab": -5, '
                         '"n_params": 1e300, "size": "12"}}]}')
    loaded = RemoteClient(url, api_key="k").connect()
    assert (loaded.n_ctx, loaded.n_ctx_train, loaded.n_vocab, loaded.n_params, loaded.model_size) == (0, 0, 0, 0, 0)
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 5 and all(n.startswith("note: the server's meta.") for n in notes)
    state.models_json = '{"data": 5}'
    with pytest.raises(EngineError, match="lists no models"):
        RemoteClient(url, api_key="k").connect()
    hostile_tried(2)


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


def test_a_number_from_a_server_is_used_only_when_plausible() -> None:
    from app.core.files.untrusted import finite_number, shown, whole_number

    assert [whole_number(v, 100) for v in (0, 7, 7.0, 100)] == [0, 7, 7, 100]
    hostile: list[object] = [[1], "5", True, False, -5, -0.5, 1.5, 101, 1e300, 10**400, float("inf"), float("nan"),
                             None, {}]
    assert all(whole_number(v, 100) is None for v in hostile)
    assert finite_number(2.5, 10) == 2.5 and finite_number(0, 10) == 0.0
    assert all(finite_number(v, 10) is None for v in (-0.1, 11, 10**400, float("inf"), float("nan"), "1", True))
    assert (shown(float("inf")), shown("5"), shown([1]), shown(True)) == ("Infinity", '"5"', "[1]", "true")
    assert shown("\x1b]0;t\x07\u202e" + "x" * 100) == '"\\u001b]0;t\\u0007\\u202exxxxxxxxxxxxxxxx…'
    assert shown(10**5000) == "int" and shown([[[]]] * 3) == "[[[]], [[]], [[]]]"


# Unicode's "prepended concatenation marks": format characters that render as visible signs (kept).
VISIBLE_FORMAT = {0x600, 0x601, 0x602, 0x603, 0x604, 0x605, 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x110BD, 0x110CD}
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
        "\u200e", "\u200f", "\u061c"]


def test_every_invisible_format_character_is_removed_or_shown_escaped() -> None:
    """Bidi controls (U+202E shows `fdp.exe` as `exe.pdf`), zero-width and tag characters: every format
    character (category Cf) this Python knows, bar the visible marks, is removed from text and shown as
    <U+XXXX> in a name; ZWJ/ZWNJ stay in text, where emoji and scripts need them."""
    import unicodedata

    from app.core.files.untrusted import clean_line, clean_text, has_invisible

    hidden = [chr(c) for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) == "Cf" and c not in VISIBLE_FORMAT]
    assert set(BIDI) <= set(hidden) and len(hidden) >= 150
    for ch in hidden:
        text = f"a{ch}b"
        assert clean_text(text) == (text if ch in "\u200c\u200d" else "ab"), hex(ord(ch))
        assert clean_line(text) == f"a<U+{ord(ch):04X}>b" and has_invisible(text), hex(ord(ch))
    for c in VISIBLE_FORMAT:
        assert clean_text(chr(c) + "1") == clean_line(chr(c) + "1") == chr(c) + "1"
    assert clean_line("one\u2028two") == "one two"  # a line separator does not start a line
    assert clean_text("👩\u200d💻 ok") == "👩\u200d💻 ok"
    assert clean_text("report\u202efdp.exe") == "reportfdp.exe" and "\u202e" not in clean_line("\u202e" * 9, 5)
    hostile_tried()


def test_a_model_named_with_a_bidi_override_is_listed_with_it_visible(tmp_path: Path) -> None:
    from app.core.config import paths

    name = "invoice\u202eFUGG.exe"
    write_synthetic_gguf(paths.models_dir() / f"{name}-Q8_0.gguf", n_layers=1, name="Nice\u2066Model\u200b")
    table = _cli("models")
    listed = _cli("models", "--json")
    assert table.returncode == 0 and listed.returncode == 0, table.stderr + listed.stderr
    for text in (table.stdout, table.stderr, listed.stdout):
        assert not any(ch in text for ch in BIDI + ["\u200b"]), repr(text)
    assert "invoice<U+202E>FUGG.exe-Q8_0.gguf" in table.stdout and "Nice<U+2066>Model<U+200B>" in table.stdout
    assert "invoice\\u202eFUGG" in listed.stdout  # JSON escapes it: the exact name, readable as what it is
    hostile_tried(2)


def test_a_remote_model_id_with_a_bidi_override_is_not_printed_raw(hostile_server: tuple[str, HostileState]) -> None:
    url, state = hostile_server
    state.model_id = "gpt\u202e4-olleh\u2067"
    state.tokens = ["Hi", "\u202e", " there"]
    proc = _cli("chat", "--remote", url, "--api-key", "k", "hello")
    assert proc.returncode == 0, proc.stderr
    for text in (proc.stdout, proc.stderr):
        assert not any(ch in text for ch in BIDI), repr(text)
    assert "gpt" in proc.stderr and "4-olleh" in proc.stderr and "Hi there" in proc.stdout
    client = RemoteClient(url, api_key="k")
    assert client.connect().model_desc == "gpt<U+202E>4-olleh<U+2067> (remote)"  # the window's name for it
    assert client.model == state.model_id  # what the server is asked for stays its own id
    hostile_tried(2)


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
