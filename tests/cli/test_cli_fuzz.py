"""Property: whatever a user types to bench, chat, recommend, sweep or quantize, the CLI answers with an exit
status and plain lines, never a traceback or an internal error, and never exits 0 with an empty measurement.

In-process `main(argv)` over generated arguments (hypothesis, derandomized so a CI run is repeatable, no
example database written into the checkout). The engine is a stand-in that answers like the real one, and
can be told to return no timings, because what is under test is the CLI's handling, not llama.cpp; the
model files are small synthetic GGUFs and the machine is a recorded one.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from app.engine import protocol as P
from app.engine.client import EngineError
from synth_gguf import write_synthetic_gguf

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

SMALL = st.integers(1, 8).map(str)  # valid almost everywhere: most examples must reach the engine
NUMBERS = st.one_of(
    SMALL, SMALL, SMALL,
    st.integers(-(10**12), 10**12).map(str),
    st.integers(-3, 600).map(str),
    st.sampled_from(["0", "-1", "", " ", "abc", "1e3", "nan", "inf", "-inf", "-0", "3.5", " 7 ", "0x10", "1_000",
                     "99999999999999999999", "2147483648", "16777217", "\udcff", "٣"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
LISTS = st.one_of(SMALL, NUMBERS, st.lists(st.one_of(SMALL, NUMBERS), min_size=0, max_size=4).map(",".join))


class FakeEngine:
    """Answers load/bench/generate like the engine process, without one. `samples` decides what a
    bench returns: real timings, none, or zeros (a broken measurement the CLI must not print as one)."""

    samples = "ok"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = P.Ready(pid=1, llama_cpp_version="fake", system_info="", gpu_offload=False)
        self.config: P.LoadConfig | None = None
        self.loaded: P.Loaded | None = None
        self._n = 0
        self._events: list[Any] = []

    def __enter__(self) -> FakeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    @property
    def alive(self) -> bool:
        return True

    def new_request_id(self, prefix: str = "r") -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def load(self, config: P.LoadConfig, timeout: float = 300.0) -> P.Loaded:
        if config.n_ctx is not None and config.n_ctx < 0:
            raise EngineError(P.Error(None, "load_failed", "n_ctx must not be negative"))
        self.config = config
        self.loaded = P.Loaded(model_path=config.model_path, load_ms=1.0, n_ctx=max(config.n_ctx or 256, 256),
                        n_ctx_train=2048, n_vocab=256, n_params=1, model_size=1, architecture="llama",
                        model_desc="fake", chat_template_name="chatml", chat_template_source="architecture",
                        n_gpu_layers=0, type_k="f16", type_v="f16", flash_attn=False, swa_full=True,
                        buffers_mib={}, kv_bytes_allocated=0, kv_cells_allocated=0, n_threads=2,
                        n_threads_batch=2, rss_bytes=0)
        return self.loaded

    def send(self, command: Any) -> None:  # the sweep backend's non-blocking path
        if isinstance(command, P.Bench):
            self._events.append(self.bench(command))

    def next_event(self, timeout: float | None = None) -> Any:
        if not self._events:
            raise EngineError(P.Error(None, "timeout", "no event"))
        return self._events.pop(0)

    def bench(self, request: P.Bench, timeout: float = 1800.0) -> P.BenchResult:
        n = request.repetitions
        samples = {"ok": [1_000_000 + i for i in range(n)], "none": [], "zeros": [0] * n}[self.samples]
        return P.BenchResult(request_id=request.request_id, n_prompt=request.n_prompt, n_gen=request.n_gen,
                             n_depth=request.n_depth, samples_ns=samples, n_threads=2,
                             model_info={"model_filename": "fake.gguf", "n_threads": 2})

    def generate(self, request: P.Generate, timeout: float = 600.0) -> Any:
        from app.core.metrics.phase import PhaseMetrics

        yield P.Token(request.request_id, "hi", 0, 0.0)
        yield P.Done(request.request_id, "hi", "length", PhaseMetrics().to_dict())


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Paths a user might pass, good and bad, plus the stand-ins for the engine and the machine."""
    import app.engine.client as client_module
    from app.core.predict import recommend

    monkeypatch.setattr(client_module, "EngineClient", FakeEngine)
    monkeypatch.setattr(recommend.Machine, "from_system", classmethod(lambda cls, **kw: _recorded_machine()))
    # the quantizer child: a process that fails at once instead of quantizing
    monkeypatch.setattr("app.engine.quantize_client.quantize_command",
                        lambda *a, **k: [sys.executable, "-c", "raise SystemExit(3)"])
    model = write_synthetic_gguf(tmp_path / "tiny.gguf", n_layers=2)
    f32 = write_synthetic_gguf(tmp_path / "tiny-f32.gguf", n_layers=1, tensor_type="F32")
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    (tmp_path / "dir").mkdir()
    return {"model": str(model), "f32": str(f32), "text": str(text), "dir": str(tmp_path / "dir"),
            "missing": str(tmp_path / "missing.gguf"), "under_file": str(text / "out.gguf"),
            "proc": "/proc/roofline-test.gguf", "out": str(tmp_path / "out" / "q.gguf")}


def _recorded_machine() -> Any:
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
    from app.core.predict.recommend import Machine
    from app.core.predict.speed import default_rates

    bw = BandwidthResult(read_gbs=13.0, copy_gbs=10.0, threads=2, buffer_bytes=1 << 28, runs=5, seconds=1.0,
                         measured_at="recorded", gemm_gflops=400.0)
    hw = HardwareInfo(CPUInfo("Xeon", "x86_64", 2, 2, ["AVX2"]), 24 * GiB, 20 * GiB, [], False)
    return Machine(hw, default_rates(hw, bw))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         stdin: bytes = b"stdin prompt \xff") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        code: Any = main(argv)
    except SystemExit as exc:  # argparse, and a few commands' own one-line exits
        code = exc.code
        if isinstance(code, str):  # Python prints such a message itself, with status 1
            print(code, file=sys.stderr)
            code = 1
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def _check(argv: list[str], code: int, out: str, err: str) -> None:
    shown = f"argv={argv!r}\nexit={code}\nstderr={err!r}"
    assert "Traceback" not in err + out, shown
    assert "internal error" not in err, shown  # the top-level handler caught something unexpected
    if code == 2:
        assert len(err.strip().splitlines()) == 1, shown  # bad input: exactly one line
    if code != 0:
        assert err.strip(), shown  # every failure says why


def _pairs(flags: list[str], values: st.SearchStrategy[str], max_size: int = 4) -> st.SearchStrategy[list[str]]:
    return st.lists(st.tuples(st.sampled_from(flags), values), max_size=max_size).map(
        lambda ps: [x for p in ps for x in p])


@SETTINGS
@given(opts=_pairs(["-p", "-n", "-d"], LISTS, 3) | _pairs(["-r", "-t", "-b", "-ub", "-ngl"], NUMBERS, 3),
       more=_pairs(["-r", "-t", "-fa"], NUMBERS, 1),
       model=st.sampled_from(["model", "model", "model", "dir", "missing", "text"]),
       samples=st.sampled_from(["ok", "none", "zeros"]))
def test_bench(opts: list[str], more: list[str], model: str, samples: str, files: dict[str, str],
               capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeEngine, "samples", samples)
    argv = ["bench", "-m", files[model], *opts, *more, "--json"]
    code, out, err = _run(argv, capsys, monkeypatch)
    _check(argv, code, out, err)
    if code == 0:
        rows = json.loads(out)
        assert rows, argv
        assert all(r["samples_ns"] and min(r["samples_ns"]) > 0 and r["avg_ts"] > 0 for r in rows), (argv, rows)


@SETTINGS
@given(opts=_pairs(["-n", "-c", "-t", "-ngl", "--top-k", "--seed"], NUMBERS)
       | _pairs(["--temp", "--top-p", "--min-p", "--repeat-penalty"], NUMBERS),
       prompt=st.one_of(st.text(max_size=20), st.sampled_from(["-", "\udcff\udc80 x", "--", ""])),
       raw=st.booleans(), model=st.sampled_from(["model", "model", "dir", "missing"]),
       prompt_file=st.sampled_from([None, "text", "dir", "missing"]))
def test_chat(opts: list[str], prompt: str, raw: bool, model: str, prompt_file: str | None,
              files: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["chat", "-m", files[model], *opts, *(["--raw"] if raw else []),
            *(["-f", files[prompt_file]] if prompt_file else []), "--", prompt]
    code, out, err = _run(argv, capsys, monkeypatch)
    _check(argv, code, out, err)


@SETTINGS
@given(ctx=st.one_of(st.none(), NUMBERS), kv=st.sampled_from(["f16", "q8_0", "q4_0", "q2", ""]),
       models=st.lists(st.sampled_from(["model", "dir", "missing", "text", "f32"]), min_size=0, max_size=3))
def test_recommend(ctx: str | None, kv: str, models: list[str], files: dict[str, str],
                   capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["recommend", "--json", "--kv-type", kv, *(["--ctx", ctx] if ctx is not None else [])]
    argv += ["-m", *[files[m] for m in models]] if models else ["-m", files["model"]]
    code, out, err = _run(argv, capsys, monkeypatch)
    _check(argv, code, out, err)


@SETTINGS
@given(kind=st.sampled_from(["grid", "depth", "ubatch", "threads", "kv", "nope"]),
       opts=_pairs(["-p", "-n", "-d", "-ub", "-t"], LISTS, 3), reps=st.one_of(st.none(), NUMBERS),
       model=st.sampled_from(["model", "model", "dir", "missing"]))
def test_sweep(kind: str, opts: list[str], reps: str | None, model: str, files: dict[str, str],
               capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["sweep", kind, "-m", files[model], *opts, *(["-r", reps] if reps is not None else [])]
    code, out, err = _run(argv, capsys, monkeypatch)
    _check(argv, code, out, err)


@SETTINGS
@given(src=st.sampled_from(["f32", "model", "dir", "missing", "text"]),
       dst=st.sampled_from(["out", "under_file", "proc", "dir", "model"]),
       qtype=st.sampled_from(["Q8_0", "q4_k_m", "Q4_K_M", "F16", "Q1", ""]),
       threads=st.one_of(st.none(), NUMBERS))
def test_quantize(src: str, dst: str, qtype: str, threads: str | None, files: dict[str, str],
                  capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["quantize", files[src], files[dst], qtype, *(["--threads", threads] if threads is not None else [])]
    code, out, err = _run(argv, capsys, monkeypatch)
    _check(argv, code, out, err)
    assert code != 0, argv  # the stand-in quantizer always fails: success would be a lie
