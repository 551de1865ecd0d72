"""`roofline sweep batch`: decode tok/s at several concurrent stream counts through the batch engine, the
predicted curve beside it, the finding; its arithmetic on known token times; bad arguments; cancelling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.bench.batch_sweep import build_rows, finding
from app.core.predict.batching import BatchPoint
from app.engine import protocol as P
from app.engine.batch.sweep import MeasuredPoint, aggregate_rate, measure_batch, token_times
from synth_gguf import write_synthetic_gguf


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code: Any = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def test_rate_while_every_stream_decodes() -> None:
    assert token_times({"t_first": 1.0, "itl_ms": [100.0, 250.0]}) == pytest.approx([1.0, 1.1, 1.35])
    # two streams of 10 tok/s each, the second starting 50 ms later: 20 tok/s together while both run
    a = [0.0, 0.1, 0.2, 0.3, 0.4]
    b = [0.05, 0.15, 0.25, 0.35, 0.45]
    assert aggregate_rate([a, b]) == pytest.approx(20.0)
    # a stream that starts late does not count the others' tokens from before it ran
    late = [0.3, 0.4]
    assert aggregate_rate([[0.0, 0.1, 0.2, 0.3, 0.4, 0.5], late]) == pytest.approx(20.0)
    assert aggregate_rate([]) == 0.0


def test_rows_and_finding() -> None:
    measured = [(1, 10.0), (2, 19.0), (4, 20.0)]
    predicted = [BatchPoint(n, 0.1, 10.0 * n, 10.0, 1.0 * n, "memory bandwidth") for n in (1, 2, 4)]
    rows = build_rows(measured, predicted)
    assert [r.gain for r in rows] == [None, pytest.approx(1.9), pytest.approx(20 / 19)]
    assert rows[2].per_stream_tps == pytest.approx(5.0) and rows[2].measured_over_predicted == pytest.approx(0.5)
    assert finding(measured).startswith("on this machine batching stops paying at ~4 streams")
    assert finding([(1, 10.0), (2, 19.0)]) == "on this machine aggregate decode tok/s still grows at 2 streams"


@pytest.mark.parametrize("argv, needle", [
    (["sweep", "batch", "--streams", "0"], "--streams"),
    (["sweep", "batch", "--streams", "1,x"], "--streams"),
    (["sweep", "batch", "--tokens", "1"], "--tokens"),
    (["sweep", "batch", "--remote", "http://127.0.0.1:1"], "--remote is not supported"),
    (["sweep", "batch", "-t", "1,2"], "one thread count"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], needle: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(argv, capsys)
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("usage:") and ln.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_json_on_stdout(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                        tmp_path: Path) -> None:
    from app.engine.batch import sweep as engine_sweep

    model = tmp_path / "m.gguf"
    write_synthetic_gguf(model, n_layers=2)
    seen: dict[str, Any] = {}

    def fake_measure(base: P.LoadConfig, counts: list[int], tokens: int, rounds: int, progress: Any) -> Any:
        seen.update(counts=counts, tokens=tokens, rounds=rounds, threads=base.n_threads)
        return [MeasuredPoint(n, 10.0 * min(n, 2), 10.0 * min(n, 2) / n, (10.0 * min(n, 2),)) for n in counts]

    monkeypatch.setattr(engine_sweep, "measure_batch", fake_measure)
    code, out, err = run_cli(["sweep", "batch", "-m", str(model), "--streams", "4,1,2", "--tokens", "16",
                              "-r", "2", "-t", "3", "--json", "-"], capsys)
    assert code == 0, err
    data = json.loads(out)  # nothing but the JSON on stdout
    assert seen == {"counts": [1, 2, 4], "tokens": 16, "rounds": 2, "threads": 3}
    assert [p["streams"] for p in data["points"]] == [1, 2, 4]
    assert [p["aggregate_tps"] for p in data["points"]] == [10.0, 20.0, 20.0]
    assert all(p["predicted_aggregate_tps"] > 0 for p in data["points"])
    assert data["finding"].startswith("on this machine batching stops paying at ~4 streams")


def test_the_prediction_is_for_the_sweeps_thread_count(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from app.core.bench.batch_sweep import predicted_curve
    from app.engine.batch import sweep as engine_sweep

    model = tmp_path / "m.gguf"
    write_synthetic_gguf(model, n_layers=2)
    monkeypatch.setattr(engine_sweep, "measure_batch", lambda base, counts, tokens, rounds, progress: [
        MeasuredPoint(n, 10.0, 10.0 / n, (10.0,)) for n in counts])
    printed = {}
    for t in (1, 2):
        code, out, err = run_cli(["sweep", "batch", "-m", str(model), "--streams", "1,4", "-t", str(t),
                                  "--json", "-"], capsys)
        assert code == 0, err
        printed[t] = [p["predicted_aggregate_tps"] for p in json.loads(out)["points"]]
        expected, _ = predicted_curve(model, [1, 4], threads=t)
        assert printed[t] == pytest.approx([p.aggregate_tps for p in expected])
    if (predicted_curve(model, [4], threads=1)[0][0].aggregate_tps
            != predicted_curve(model, [4], threads=2)[0][0].aggregate_tps):  # a machine with 2+ cores
        assert printed[1] != printed[2]


@pytest.mark.model
def test_sweep_batch_on_the_default_model(default_model: Path, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    out_json = tmp_path / "batch.json"
    code, out, err = run_cli(["sweep", "batch", "--streams", "1,2", "--tokens", "8", "-r", "1", "-t", "2",
                              "--json", str(out_json)], capsys)
    assert code == 0, err
    assert "| 1 |" in out and "| 2 |" in out and "on this machine" in out
    data = json.loads(out_json.read_text())
    assert [p["streams"] for p in data["points"]] == [1, 2]
    assert all(p["aggregate_tps"] > 0 and p["predicted_aggregate_tps"] > 0 for p in data["points"])
    assert data["model"] == default_model.name


@pytest.mark.model
def test_cancel_stops_between_counts_and_keeps_what_was_measured(default_model: Path) -> None:
    calls: list[int] = []
    cancel = {"now": False}

    def progress(i: int, n: int, label: str) -> None:
        calls.append(i)
        cancel["now"] = i >= 2  # the second count is cancelled as it starts

    points = measure_batch(P.LoadConfig(model_path=str(default_model), n_threads=2), [1, 2], tokens=16,
                           progress=progress, cancelled=lambda: cancel["now"])
    assert [p.streams for p in points] == [1] and points[0].aggregate_tps > 0
    assert calls == [1, 2]
