"""`roofline chat`'s last summary line: the "why slow:" cause when the reply ran under 0.7× its prediction
for this load, else the measured/predicted ratios (app.commands.chat.slow_summary_line). Speeds are set as
shares of the prediction, never absolute."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.commands.chat import slow_summary_line
from app.core.bench.zoo import zoo_path
from app.core.metrics.evidence import Evidence
from app.core.metrics.phase import PhaseMetrics
from app.core.predict.reply_check import expected, for_load
from app.engine import protocol as P
from fake_engine import loaded_event


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> P.Loaded:
    model = zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path_factory.mktemp("zoo"))
    return dataclasses.replace(loaded_event(), model_path=str(model), n_ctx=4096, n_threads=2)


def _done(loaded: P.Loaded, decode_share: float, prefill_share: float, ev: Evidence | None) -> P.Done:
    info, rates, cfg = for_load(loaded.model_path, loaded.n_ctx, n_threads=loaded.n_threads)
    m = PhaseMetrics(prompt_tokens=100, prefill_tokens=100, prefill_ms=1.0, decode_tokens=31, generated_tokens=32)
    decode, prefill = expected(info, rates, cfg, m)
    m.decode_ms = 1000.0 * 31 / (decode * decode_share)
    m.prefill_ms = 1000.0 * 100 / (prefill * prefill_share)
    data = m.to_dict()
    if ev is not None:
        data["evidence"] = ev.to_dict()
    return P.Done("c1", "text", "length", data)


def test_a_slow_prefill_names_the_swap(loaded: P.Loaded) -> None:
    ev = Evidence(wall_s=3.0, n_cpus=4, threads=2, other_cores=0.1, swap_in_bytes=900 * 2**20)
    line = slow_summary_line(loaded, _done(loaded, 0.9, 0.3, ev))
    assert line.startswith("why slow: prefill ") and "0.30× the prediction" in line
    assert line.endswith("the system swapped 900.0 MiB in during the reply: RAM is short")


def test_a_reply_near_its_prediction_gives_the_ratios(loaded: P.Loaded) -> None:
    line = slow_summary_line(loaded, _done(loaded, 0.9, 1.1, Evidence()))
    assert line == "speed   : decode 0.90×, prefill 1.10× the prediction for this load"


def test_a_missing_model_file_is_one_line(loaded: P.Loaded, tmp_path: Path) -> None:
    gone = dataclasses.replace(loaded, model_path=str(tmp_path / "gone.gguf"))
    line = slow_summary_line(gone, P.Done("c1", "", "length", PhaseMetrics().to_dict()))
    assert line.startswith("speed   : no prediction to compare with (") and "\n" not in line


@pytest.mark.model
def test_a_real_chat_ends_with_the_line(default_model: Path) -> None:
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "app.cli", "chat", "--raw", "Once upon a time", "-n", "12",
                          "--temp", "0", "-t", "1"], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert res.returncode == 0, res.stderr
    last = res.stdout.rstrip().splitlines()[-1]
    # which one depends on this machine's load now: either names a cause or gives both phases' ratios
    assert last.startswith("why slow: ") or (last.startswith("speed   : decode ") and "the prediction" in last)


@pytest.mark.parametrize(("placed", "warned"), [(0, True), (19, False)])
def test_the_header_warns_when_the_gpu_layers_ran_on_the_cpu(loaded: P.Loaded, placed: int, warned: bool,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`roofline chat`'s header, under the model line: the load's placement as the engine reported it."""
    import argparse

    from app.commands.chat import _print_header

    event = dataclasses.replace(loaded, gpu_layers_requested=-1, gpu_layers_placed=placed, gpu_layers_total=19)
    _print_header(argparse.Namespace(raw=True), event, P.LoadConfig(model_path=event.model_path))
    err = capsys.readouterr().err
    assert ("warning: Only 0 of 19 layers are on the GPU (the plan was 19)" in err) is warned
