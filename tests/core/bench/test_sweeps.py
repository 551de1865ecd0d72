"""Sweeps: planning, the crossover interpolation, findings, and real sweeps on the default model whose JSON
loads in a llama-bench-compatible reader written here (field names and types as llama-bench writes them)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core.bench.sweep_findings import crossover
from app.core.bench.sweeps import Measurement, Step, analyse, plan, run_sweep
from llama_bench_json import read_llama_bench_json

# ------------------------------------------------------------------ pure planning and analysis


def _m(step: Step, ms: float) -> Measurement:
    return Measurement(step, [int(ms * 1e6)] * 2, {"n_threads": 2})


def test_grid_plan_pairs_each_prompt_with_decode_at_that_depth() -> None:
    steps = plan("grid", {"prompts": [128, 64], "gens": [16]})
    assert [(s.n_prompt, s.n_gen, s.n_depth) for s in steps] == [(64, 0, 0), (0, 16, 64), (128, 0, 0), (0, 16, 128)]
    with pytest.raises(ValueError, match="positive"):
        plan("grid", {"prompts": [0, 64]})
    with pytest.raises(ValueError, match="only runs 'grid'"):
        plan("ubatch", remote=True)
    ub = plan("ubatch", {"ubatches": [64, 256], "n_prompt": 128})
    assert [s.config_dict["n_ubatch"] for s in ub] == [64, 256]
    assert all(s.config_dict["n_batch"] >= s.config_dict["n_ubatch"] for s in ub)
    assert {s.config_dict["n_threads"] for s in plan("threads", n_cpus=3)} == {1, 2, 3}


def test_crossover_is_interpolated_between_the_bracketing_prompt_lengths() -> None:
    # prefill 1 ms/token; decode of 100 tokens: 500 ms at depth 256, 520 ms at depth 1024
    ms = [_m(Step(256, 0), 256), _m(Step(0, 100, 256), 500), _m(Step(1024, 0), 1024), _m(Step(0, 100, 1024), 520)]
    result = analyse("grid", ms)
    # diff goes from -244 at 256 to +504 at 1024: zero at 256 + 244 * 768 / 748
    expected = 256 + 244 * 768 / 748
    assert result.crossover is not None and math.isclose(result.crossover["n_prompt"], expected)
    assert "prompts over ~510 tokens with 100-token answers are prefill-dominated" in result.finding
    assert [c["dominant"] for c in result.points] == ["decode", "prefill"]


def test_all_decode_dominated_says_so_and_extrapolates() -> None:
    ms = [_m(Step(64, 0), 64), _m(Step(0, 32, 64), 1000), _m(Step(128, 0), 128), _m(Step(0, 32, 128), 1010)]
    result = analyse("grid", ms)
    assert "decode-dominated for every prompt measured, up to 128 tokens" in result.finding
    p_star, extrapolated = crossover(result.points, 32)
    assert extrapolated and p_star is not None and math.isclose(p_star, 64 + 936 * 64 / 54)


def test_a_noisy_grid_is_not_reported_as_a_clean_crossover() -> None:
    ms = [_m(Step(64, 0), 10), _m(Step(0, 32, 64), 100), _m(Step(128, 0), 300), _m(Step(0, 32, 128), 100),
          _m(Step(256, 0), 50), _m(Step(0, 32, 256), 100)]
    assert "disagree" in analyse("grid", ms).finding


def test_other_findings_name_the_best_setting() -> None:
    ub = [_m(Step(512, 0, 0, (("n_batch", 512), ("n_ubatch", u))), ms) for u, ms in ((64, 2000), (256, 1000))]
    assert "n_ubatch = 256 (512 tok/s)" in analyse("ubatch", ub).finding
    depth = [_m(Step(0, 32, d), ms) for d, ms in ((0, 1000), (1024, 1250))]
    assert ("32.0 tok/s with 0 tokens" in analyse("depth", depth).finding
            and "(-20 %)" in analyse("depth", depth).finding)


def test_the_offload_sweep_plans_quarters_of_the_layers_and_sets_the_prediction_beside() -> None:
    from app.core.bench.sweeps import attach_offload_prediction

    steps = plan("offload", {"n_layers": 24})
    layers = sorted({s.config_dict["n_gpu_layers"] for s in steps})
    assert layers == [0, 6, 12, 18, 25] and len(steps) == 10  # a prompt and a decode per value, 25: all
    assert [s.config_dict["n_gpu_layers"] for s in steps[:2]] == [0, 0]  # one reload per value
    assert sorted({s.config_dict["n_gpu_layers"] for s in plan("offload", {"layers": [3, 0]})}) == [0, 3]
    with pytest.raises(ValueError, match="layer count"):
        plan("offload", {})
    ms = [_m(Step(128, 0, 0, (("n_gpu_layers", n),)), 1000.0 / (1 + n)) for n in (0, 25)]
    ms += [_m(Step(0, 16, 0, (("n_gpu_layers", n),)), 1000.0 / (1 + n / 5)) for n in (0, 25)]
    result = analyse("offload", ms)
    assert [p["n_gpu_layers"] for p in result.points] == [0, 25]
    assert "from 16.0 tok/s with 0 layers on the GPU to 96.0 with 25 (6.00×)" in result.finding
    attach_offload_prediction(result, lambda ngl: 10.0 + 4 * ngl)
    assert result.predicted == [{"n_gpu_layers": 0, "decode_tps": 10.0}, {"n_gpu_layers": 25, "decode_tps": 110.0}]
    assert "110.0 tok/s (1.15× the measured)" in result.finding and result.to_json()["predicted"]


class _Fake:
    """A backend that counts reloads and can cancel itself: planning/cancel logic without an engine."""

    remote = False

    def __init__(self, cancel_after: int | None = None) -> None:
        self.configs: list[dict[str, Any]] = []
        self.done = 0
        self.cancel_after = cancel_after

    def configure(self, config: dict[str, Any]) -> None:
        self.configs.append(config)

    def measure(self, step: Step, repetitions: int) -> Measurement:
        self.done += 1
        return _m(step, 100.0 + step.n_prompt)

    def describe(self) -> dict[str, Any]:
        return {"backend": "CPU"}

    def cancelled(self) -> bool:
        return self.cancel_after is not None and self.done >= self.cancel_after


def test_run_reloads_once_per_configuration_and_keeps_results_on_cancel() -> None:
    fake = _Fake()
    run_sweep("threads", plan("threads", {"threads": [1, 2]}), fake, 1)
    assert fake.configs == [{"n_threads": 1, "n_threads_batch": 1}, {"n_threads": 2, "n_threads_batch": 2}]
    fake = _Fake(cancel_after=3)
    seen: list[tuple[int, int, str]] = []
    result = run_sweep("grid", plan("grid", {"prompts": [64, 128, 256], "gens": [8]}), fake, 1,
                       lambda i, n, s: seen.append((i, n, s)), fake.cancelled)
    assert result.cancelled and len(result.measurements) == 3
    assert result.finding.startswith("(cancelled after 3 of 6 measurements)")
    assert seen[-1] == (3, 6, "cancelled")


# ------------------------------------------------------------------ real sweeps on the default model


@pytest.mark.model
def test_grid_sweep_cli_exports_llama_bench_json_csv_and_png(default_model: Path, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "app.cli", "sweep", "grid", "-p", "32,96", "-n", "4,12", "-r", "1",
                          "--json", str(tmp_path / "g.json"), "--csv", str(tmp_path / "g.csv"),
                          "--png", str(tmp_path / "g.png")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = read_llama_bench_json((tmp_path / "g.json").read_text())
    tests = sorted((r["n_prompt"], r["n_gen"], r["n_depth"]) for r in rows)
    assert tests == [(0, 4, 32), (0, 4, 96), (0, 12, 32), (0, 12, 96), (32, 0, 0), (96, 0, 0)]
    assert all(r["model_filename"] == str(default_model) and r["model_n_params"] > 0 for r in rows)
    csv_lines = (tmp_path / "g.csv").read_text().splitlines()
    assert csv_lines[0].startswith("n_prompt,n_gen,prefill_ms,decode_ms") and len(csv_lines) == 5
    # Each CSV cell is the pp row's time plus the tg row's time at that depth.
    pp = {r["n_prompt"]: r["avg_ns"] / 1e6 for r in rows if r["n_prompt"]}
    first = dict(zip(csv_lines[0].split(","), csv_lines[1].split(","), strict=False))
    assert math.isclose(float(first["prefill_ms"]), pp[int(first["n_prompt"])], rel_tol=1e-3)
    # The finding (last line) is about this grid: the answer length nearest 100 tokens (12), with the rates
    # read from these cells; "Not enough measurements" or a finding about other sizes fails.
    finding = out.stdout.strip().splitlines()[-1]
    assert "12-token answers" in finding and "prefill ≈" in finding and "decode ≈" in finding, finding
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_validator_rejects_what_llama_bench_would_not_write() -> None:
    from app.core.bench.llama_bench_format import bench_row

    row = bench_row(n_prompt=64, n_gen=0, n_depth=0, samples_ns=[10_000_000, 12_000_000],
                    model_info={"model_filename": "m.gguf", "n_threads": 2})
    read_llama_bench_json(json.dumps([row]))
    for broken in ({**row, "n_gen": 5}, {k: v for k, v in row.items() if k != "avg_ts"},
                   {**row, "samples_ts": [1.0, 2.0]}):
        with pytest.raises(ValueError):
            read_llama_bench_json(json.dumps([broken]))


@pytest.mark.model
def test_kv_and_ubatch_sweeps_reload_the_engine_per_variant(default_model: Path) -> None:
    from app.engine import protocol as P
    from app.engine.client import EngineClient
    from app.engine.sweep_backend import EngineSweepBackend

    base = P.LoadConfig(model_path=str(default_model), n_ctx=256, n_threads=1, n_threads_batch=1)
    with EngineClient() as engine:
        backend = EngineSweepBackend(engine, base, warmup=False)
        kv = run_sweep("kv", plan("kv", {"n_prompt": 32, "n_gen": 4, "n_depth": 32}), backend, 1)
        ub = run_sweep("ubatch", plan("ubatch", {"ubatches": [16, 64], "n_prompt": 64}), backend, 1)
    rows = read_llama_bench_json(json.dumps(kv.rows() + ub.rows()))
    # the engine's own report of each loaded configuration, not the plan's
    seen = {(r["type_k"], r["type_v"], r["flash_attn"]) for r in rows[:6]}
    assert seen == {("f16", "f16", False), ("f16", "f16", True), ("q8_0", "q8_0", True)}
    assert [r["n_ubatch"] for r in rows[6:]] == [16, 64]
    assert len(kv.points) == 3 and kv.finding.startswith("Against K f16/V f16, FA off")
    assert "n_ubatch" in ub.finding
