"""Each bad input a clumsy or hostile user tried gets one clear line and a non-zero exit, never a traceback:
numeric options out of range, a context that cannot fit (with the largest one that does), a directory for a
model, prompts from standard input / a file / not UTF-8, output paths that cannot be written, and an
unexpected exception (one line naming a log file that holds the traceback)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from synth_gguf import write_synthetic_gguf


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code: Any = main(argv)
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
    out, err = capsys.readouterr()
    return int(code or 0), out, err


@pytest.mark.parametrize("argv, option", [
    (["bench", "-p", "8", "-n", "0", "-r", "0"], "-r/--repetitions"),
    (["bench", "-t", "-3"], "-t/--threads"),
    (["bench", "-d", "-100"], "-d/--n-depth"),
    (["bench", "-p", "abc"], "-p/--n-prompt"),
    (["bench", "-p", ","], "-p/--n-prompt"),
    (["bench", "-ub", "0"], "-ub/--ubatch-size"),
    (["bench", "-ngl", "-2"], "-ngl/--n-gpu-layers"),
    (["chat", "--raw", "x", "-n", "-5"], "-n/--max-tokens"),
    (["chat", "--ctx", "0", "hi"], "-c/--ctx"),
    (["chat", "--ctx", "-1", "hi"], "-c/--ctx"),
    (["chat", "--temp", "nan", "hi"], "--temp"),
    (["chat", "--top-p", "1.5", "hi"], "--top-p"),
    (["chat", "--repeat-penalty", "0", "hi"], "--repeat-penalty"),
    (["chat", "--seed", "-1", "hi"], "--seed"),
    (["recommend", "--ctx", "0"], "--ctx"),
    (["sweep", "grid", "-r", "0"], "-r/--repetitions"),
    (["sweep", "threads", "-t", "0,2"], "-t/--threads"),
    (["tune", "-r", "-1"], "-r/--repetitions"),
    (["quantize", "a.gguf", "b.gguf", "Q8_0", "--threads", "-4"], "--threads"),
])
def test_numeric_options_are_checked_at_the_edge(argv: list[str], option: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err  # one line, not the usage block
    assert option in err and "Traceback" not in err and not out


@pytest.mark.parametrize("argv", [
    ["chat", "-t", "1024", "hi"], ["bench", "-t", "257"], ["serve", "-t", "1024"], ["calibrate", "-t", "100000"],
    ["recommend", "-t", "1024"], ["sweep", "threads", "-t", "1,1024"],
    ["quantize", "a.gguf", "b.gguf", "Q8_0", "--threads", "1024"],
])
def test_every_threads_option_has_the_settings_bound(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """More threads than llama.cpp can start ("libgomp: Thread creation failed" at 1024) are refused as the
    settings refuse them. Parsed only: a command that wrongly accepted them must not start (serve never ends)."""
    from app.cli import build_parser
    from app.commands import _args
    from app.core.config import settings

    assert _args.MAX_THREADS == settings.MAX_THREADS <= 512  # llama.cpp's GGML_MAX_N_THREADS
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "threads" in err and f"must be at most {settings.MAX_THREADS}" in err and "Traceback" not in err
    args = build_parser().parse_args([a if a not in ("1024", "257", "100000", "1,1024") else str(settings.MAX_THREADS)
                                      for a in argv])
    assert settings.MAX_THREADS in (args.threads if isinstance(args.threads, list) else [args.threads])


def test_a_context_that_cannot_fit_is_refused_before_loading_with_the_largest_that_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from app.commands import _preflight
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.memory import MemoryConfig, estimate_memory

    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=4)
    ram = 64 << 20
    monkeypatch.setattr(_preflight, "machine_limits", lambda: _preflight.Limits(ram=ram, vram=None))
    import app.engine.client as client_module

    monkeypatch.setattr(client_module, "EngineClient", None)  # a load attempt would fail loudly
    code, _, err = run_cli(["chat", "-m", str(model), "--ctx", "10000000", "hi"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "10000000-token context does not fit" in err
    found = re.search(r"the largest context that fits is (\d+) \(--ctx (\d+)\)", err)
    assert found and found.group(1) == found.group(2), err
    best = int(found.group(1))
    info = inspect_gguf(model)
    # The named context fits the stated memory and the next step up does not.
    assert estimate_memory(info, MemoryConfig(n_ctx=best)).total <= ram
    assert estimate_memory(info, MemoryConfig(n_ctx=best + 256)).total > ram
    # bench says it in its own terms
    code, _, err = run_cli(["bench", "-m", str(model), "-p", "9000000", "-n", "0", "-r", "1"], capsys)
    assert code == 1 and "keep -p + -n + -d within" in err, err


def test_a_directory_given_as_the_model_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["chat", "-m", str(tmp_path), "hi"], ["bench", "-m", str(tmp_path)],
                 ["info", "-m", str(tmp_path)], ["models", "--import", str(tmp_path)]):
        code, _, err = run_cli(argv, capsys)
        assert code == 1 and "is a directory" in err and "not found" not in err, (argv, err)


def test_prompt_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from app.commands._prompt import read_prompt

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from stdin \xff\xfe ok")))
    assert read_prompt("-", None) == "from stdin \ufffd\ufffd ok"
    assert "2 undecodable byte(s)" in capsys.readouterr().err
    big = tmp_path / "big.txt"
    big.write_text("word " * 50_000)  # 250k characters: past what an argument list may hold
    assert read_prompt(None, str(big)) == "word " * 50_000
    assert capsys.readouterr().err == ""  # valid UTF-8: no note
    assert read_prompt("caf\udcc3\udca9", None) == "café"  # argv bytes that were UTF-8 after all
    assert read_prompt("x \udcff", None) == "x \ufffd"
    assert "the prompt is not valid UTF-8" in capsys.readouterr().err
    for argv, says in ([["chat", "-f", str(tmp_path / "nope.txt")], "prompt file not found"],
                       [["chat", "-f", str(tmp_path)], "is a directory"],
                       [["chat", "-f", str(big), "also"], "not both"],
                       [["chat"], "no prompt"]):
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.model
def test_a_non_utf8_prompt_on_standard_input_is_answered(default_model: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "app.cli", "chat", "--raw", "-", "-n", "2", "--temp", "0", "--json"],
                         input=b"The capital of France is \xff", capture_output=True, timeout=300)
    err = out.stderr.decode()
    assert out.returncode == 0, err
    assert "Traceback" not in err and "1 undecodable byte(s)" in err
    assert b'"finish_reason": "length"' in out.stdout


def test_quantize_output_paths_fail_with_the_right_cause(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1, tensor_type="F32")
    notes = tmp_path / "notes.gguf"
    notes.write_text("a file, not a folder")
    code, _, err = run_cli(["quantize", str(src), str(notes / "out.gguf"), "Q8_0"], capsys)
    assert code == 1 and f"{notes} is a file, not a folder" in err, err
    code, _, err = run_cli(["quantize", str(src), "/proc/roofline-x.gguf", "Q8_0"], capsys)
    assert code == 1 and "cannot write" in err and "disk space" not in err and "download" not in err, err
    code, _, err = run_cli(["quantize", str(src), str(tmp_path), "Q8_0"], capsys)
    assert code == 1 and "is a directory" in err, err
    # A writable folder without room: now it is about space, and in the quantizer's words.
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1024))
    code, _, err = run_cli(["quantize", str(src), str(tmp_path / "q" / "out.gguf"), "Q8_0"], capsys)
    assert code == 1 and "not enough disk space" in err and "the quantized model needs" in err, err
    assert len(err.strip().splitlines()) == 1


def test_pull_says_when_the_models_folder_cannot_be_used(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         roofline_home: Path) -> None:
    from app.core.hub import listing as hub

    monkeypatch.setattr(hub, "list_variants", lambda repo: _one_variant(repo))
    (roofline_home / "data").mkdir()
    (roofline_home / "data" / "models").write_text("a file where the models folder should be")
    code, _, err = run_cli(["pull", "acme/Tiny-GGUF:Q8_0"], capsys)
    assert code == 1 and "models folder" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def _one_variant(repo: str) -> Any:
    from app.core.hub import listing as hub

    f = hub.HubFile(path="tiny-Q8_0.gguf", size=1000, sha256="0" * 64)
    return hub.RepoVariants(repo_id=repo, revision="main", variants=[hub.Variant(quant="Q8_0", files=[f])])


def test_an_unexpected_exception_is_one_line_and_a_log_file(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            roofline_home: Path) -> None:
    from app.commands import hw

    def planted(args: Any) -> int:
        raise RuntimeError("planted failure\nsecond line")

    monkeypatch.setattr(hw, "run", planted)
    code, out, err = run_cli(["hw"], capsys)
    assert code == 1 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "internal error: RuntimeError: planted failure; details in " in lines[0]
    log = Path(lines[0].rsplit("details in ", 1)[1])
    assert log.parent == roofline_home / "data" / "logs"  # the app's data folder, inside the sandbox
    text = log.read_text()
    assert "Traceback" in text and "planted failure" in text and "in planted" in text and "roofline hw" in text
