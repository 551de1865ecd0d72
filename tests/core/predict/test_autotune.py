"""Auto-tune: the coordinate search on a backend with known rates, the stored choice keyed by machine and
model, and one real (tiny) tune on the default model through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core.bench.sweeps import Measurement, Step
from app.core.predict import autotune as A


class Modelled:
    """Rates from a table: decode is best on 1 thread, prefill on 4, n_ubatch 256 helps prefill by 20 %."""

    remote = False

    def __init__(self) -> None:
        self.cfg: dict[str, Any] = {}
        self.loads = 0

    def configure(self, config: dict[str, Any]) -> None:
        self.cfg = config
        self.loads += 1

    def measure(self, step: Step, repetitions: int) -> Measurement:
        if step.n_prompt:
            tps = {1: 100.0, 2: 180.0, 4: 300.0}[self.cfg["n_threads_batch"]]
            tps *= {64: 0.7, 128: 0.9, 256: 1.2, 512: 1.0}[self.cfg["n_ubatch"]]
        else:
            tps = {1: 40.0, 2: 35.0, 4: 20.0}[self.cfg["n_threads"]]
        n = step.n_prompt + step.n_gen
        return Measurement(step, [int(n / tps * 1e9)], {})

    def describe(self) -> dict[str, Any]:
        return {}


def test_search_picks_each_phase_best_threads_then_the_best_ubatch() -> None:
    backend = Modelled()
    seen: list[str] = []
    result = A.autotune(backend, threads=[1, 2, 4], progress=lambda i, n, s: seen.append(s))
    assert (result.best.n_threads, result.best.n_threads_batch, result.best.n_ubatch) == (1, 4, 256)
    assert result.best.decode_tps == pytest.approx(40.0, rel=1e-6)
    assert result.best.prefill_tps == pytest.approx(360.0, rel=1e-6)
    assert backend.loads == 2 * (3 + 4)  # two interleaved rounds: each thread count, then each n_ubatch
    assert seen[-1] == "done" and "n_ubatch 256" in result.finding


def test_thread_candidates_cover_one_powers_of_two_and_the_core_counts() -> None:
    assert A.thread_candidates(2, 2) == [1, 2]
    assert A.thread_candidates(12, 6) == [1, 2, 4, 6, 8, 12]
    assert A.thread_candidates(1, 1) == [1]


def test_choice_is_stored_per_machine_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 10)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"y" * 20)
    assert A.tuned_config(model) is None
    A.save_tuned(model, A.autotune(Modelled(), threads=[1, 2, 4]))
    assert A.tuned_config(model) == {"n_threads": 1, "n_threads_batch": 4, "n_ubatch": 256, "n_batch": 512}
    assert A.tuned_config(other) is None
    monkeypatch.setattr(A, "tuning_machine", lambda: "another machine")
    assert A.tuned_config(model) is None  # a different machine re-tunes
    monkeypatch.undo()
    A.store_path().write_text("{not json")
    assert A.tuned_config(model) is None  # a damaged file is ignored, not fatal
    A.store_path().write_text(json.dumps({"version": 1, "entries": {
        f"{A.tuning_machine()}|{A.model_key(model)}": {"config": {"n_threads": "four"}}}}))
    assert A.tuned_config(model) is None


@pytest.mark.model
def test_tune_cli_on_the_default_model_stores_a_choice_it_measured(default_model: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "app.cli", "tune", "-r", "1", "--rounds", "1", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    tried = data["tried"]
    assert len(tried) == len(A.thread_candidates()) + len(A.UBATCHES)
    assert A.tuned_config(default_model) == data["config"]
    # the stored choice follows from what was measured: decode threads by tg, batch threads by pp, then
    # the n_ubatch with the fastest prefill (decode does not depend on it); one round here, for time:
    # the rounds' interleaving is test_a_load_burst_during_one_round_does_not_pick_the_winner's
    n_threads = len(A.thread_candidates())
    phase1, phase2 = tried[:n_threads], tried[n_threads:]
    cfg = data["config"]
    assert cfg["n_threads"] == max(phase1, key=lambda c: c["decode_tps"])["n_threads"]
    assert cfg["n_threads_batch"] == max(phase1, key=lambda c: c["prefill_tps"])["n_threads"]
    assert cfg["n_ubatch"] == max(phase2, key=lambda c: c["prefill_tps"])["n_ubatch"]
    shown = subprocess.run([sys.executable, "-m", "app.cli", "tune", "--show"], capture_output=True, text=True)
    assert shown.returncode == 0 and "n_ubatch" in shown.stdout


def test_a_load_burst_during_one_round_does_not_pick_the_winner() -> None:
    class Bursty(Modelled):
        """The 1-thread decode measurement of the first round runs while something else hogs the CPU."""

        def __init__(self) -> None:
            super().__init__()
            self.tg_calls = 0

        def measure(self, step: Step, repetitions: int) -> Measurement:
            m = super().measure(step, repetitions)
            if not step.n_prompt:
                self.tg_calls += 1
                if self.cfg["n_threads"] == 1 and self.tg_calls == 1:
                    m.samples_ns = [ns * 5 for ns in m.samples_ns]
            return m

    assert A.autotune(Bursty(), threads=[1, 2, 4]).best.n_threads == 1
