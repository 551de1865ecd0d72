"""Draft-model speed-up prediction (app.core.predict.speculative_speedup) on the zoo's real shapes: the
standard expected-tokens formula, step times that agree with the speed model, and predictions that move the
right way."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import GGUFInfo, inspect_gguf
from app.core.predict.memory import MemoryConfig
from app.core.predict.speculative_speedup import (
    acceptance_from_rate,
    acceptance_rate,
    break_even_acceptance,
    expected_tokens,
    predict_speedup,
    speedup_line,
    step_seconds,
)
from app.core.predict.speed import DeviceRates, Rates, predict

# A CPU whose decode is memory-bound (arithmetic far faster than reading weights), one that is compute-bound
# (a big vocabulary's output matrix on slow kernels), and a GPU that holds the whole target.
MEMORY_BOUND = Rates(DeviceRates("cpu", 20.0, 0.5, 0.002, 100e9, decode_rates={"*": 1e12}, t_layer_s=1e-5))
COMPUTE_BOUND = Rates(DeviceRates("cpu", 200.0, 0.5, 0.0005, 10e9, decode_rates={"*": 2e9}))
GPU = Rates(MEMORY_BOUND.cpu, DeviceRates("gpu", 900.0, 0.8, 0.004, 100e12))


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GGUFInfo]:
    d = tmp_path_factory.mktemp("zoo")
    return {key: inspect_gguf(zoo_path(key, "Q4_K_M", d))
            for key in ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "qwen2.5-0.5b", "qwen2.5-7b")}


def test_expected_tokens_is_the_standard_formula() -> None:
    assert expected_tokens(0.0, 8) == 1.0  # nothing accepted: the target's own token only
    assert expected_tokens(1.0, 8) == 9.0  # everything accepted, plus the bonus token
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_tokens(0.8, 4) == pytest.approx(sum(0.8 ** i for i in range(5)))


def test_a_measured_acceptance_ratio_gives_back_the_per_token_acceptance() -> None:
    for alpha in (0.1, 0.45, 0.7, 0.93):
        for k in (2, 3.5, 8):
            assert acceptance_from_rate(acceptance_rate(alpha, k), k) == pytest.approx(alpha, abs=1e-6)
    # the ratio understates α: later drafts of a step are only tried when the earlier ones were accepted
    assert acceptance_rate(0.7, 8) < 0.7


def test_a_one_token_step_is_the_speed_models_decode_step(zoo: dict[str, GGUFInfo]) -> None:
    for rates, ngl in ((MEMORY_BOUND, 0), (COMPUTE_BOUND, 0), (GPU, 99), (GPU, 10)):
        cfg = MemoryConfig(n_ctx=4096, n_gpu_layers=ngl)
        for info in zoo.values():
            expect = predict(info, rates, cfg, depth=300).decode_s_per_token
            assert step_seconds(info, rates, cfg, 300) == pytest.approx(expect, rel=1e-9)


def test_verifying_a_batch_costs_little_when_memory_bound_and_a_lot_when_compute_bound(
        zoo: dict[str, GGUFInfo]) -> None:
    info, cfg = zoo["llama-3.1-8b"], MemoryConfig(n_ctx=4096)
    one, nine = (step_seconds(info, MEMORY_BOUND, cfg, 256, n) for n in (1, 9))
    assert nine < 1.1 * one
    one, nine = (step_seconds(info, COMPUTE_BOUND, cfg, 256, n) for n in (1, 9))
    assert nine > 5 * one


def test_a_bigger_target_or_a_smaller_draft_predicts_more_speed_up(zoo: dict[str, GGUFInfo]) -> None:
    cfg = MemoryConfig(n_ctx=4096)

    def gain(target: str, draft: str, alpha: float = 0.8) -> float:
        return predict_speedup(zoo[target], zoo[draft], MEMORY_BOUND, alpha, 6, cfg).speedup

    assert gain("llama-3.1-8b", "llama-3.2-1b") > gain("llama-3.2-3b", "llama-3.2-1b") > 1.0
    assert gain("qwen2.5-7b", "qwen2.5-0.5b") > gain("llama-3.1-8b", "llama-3.2-3b")
    assert gain("llama-3.1-8b", "llama-3.2-1b") > gain("llama-3.1-8b", "llama-3.2-3b")
    # better acceptance, more speed-up; none at all, a slowdown
    assert gain("llama-3.1-8b", "llama-3.2-1b", 0.95) > gain("llama-3.1-8b", "llama-3.2-1b", 0.6)
    assert gain("llama-3.1-8b", "llama-3.2-1b", 0.0) < 1.0


def test_a_compute_bound_target_never_gains_and_the_break_even_is_said(zoo: dict[str, GGUFInfo]) -> None:
    target, draft, cfg = zoo["llama-3.2-3b"], zoo["qwen2.5-0.5b"], MemoryConfig(n_ctx=4096)
    assert predict_speedup(target, draft, COMPUTE_BOUND, 1.0, 4, cfg).speedup < 1.0
    assert break_even_acceptance(target, draft, COMPUTE_BOUND, 4, cfg) is None
    assert "cannot pay" in speedup_line(target, draft, COMPUTE_BOUND, 4, cfg)
    even = break_even_acceptance(zoo["llama-3.1-8b"], zoo["llama-3.2-1b"], MEMORY_BOUND, 6, cfg)
    assert even is not None and 0.0 < even < 0.6
    assert predict_speedup(zoo["llama-3.1-8b"], zoo["llama-3.2-1b"], MEMORY_BOUND, even, 6, cfg).speedup == \
        pytest.approx(1.0, abs=1e-3)
    assert f"pays above {100 * even:.0f} %" in speedup_line(zoo["llama-3.1-8b"], zoo["llama-3.2-1b"],
                                                            MEMORY_BOUND, 6, cfg)


def test_the_draft_is_predicted_on_the_cpu_even_when_the_target_is_on_the_gpu(zoo: dict[str, GGUFInfo]) -> None:
    cfg = MemoryConfig(n_ctx=4096, n_gpu_layers=99)
    p = predict_speedup(zoo["llama-3.1-8b"], zoo["llama-3.2-1b"], GPU, 0.8, 4, cfg)
    assert p.draft_s == pytest.approx(step_seconds(zoo["llama-3.2-1b"], GPU, MemoryConfig(n_ctx=4096), 256))
    assert p.target_s == pytest.approx(step_seconds(zoo["llama-3.1-8b"], GPU, cfg, 256))
    assert p.draft_s > p.target_s  # a 1B on the CPU is slower than an 8B on this GPU: drafting loses
    assert p.speedup < 1.0


def test_the_chat_summary_gives_the_measured_and_the_predicted_speed_up(tmp_path: Path,
                                                                        zoo: dict[str, GGUFInfo]) -> None:
    from app.commands._draft_summary import speedup_lines

    target, draft = zoo_path("llama-3.1-8b", "Q4_K_M", tmp_path), zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    run = {"draft_tokens": 60, "draft_accepted": 36, "lookup_batch_steps": 15, "lookup_speedup": 1.37,
           "prompt_tokens": 200, "generated_tokens": 100}
    [line] = speedup_lines(run, target, draft, 4096, "f16", 0, rates=MEMORY_BOUND)
    alpha = acceptance_from_rate(36 / 60, 4.0)
    expect = predict_speedup(zoo["llama-3.1-8b"], zoo["llama-3.2-1b"], MEMORY_BOUND, alpha, 4.0,
                             MemoryConfig(n_ctx=4096), depth=250).speedup
    assert line.startswith("speed-up: measured ×1.37")
    assert f"predicted ×{expect:.2f}" in line and f"≈{100 * alpha:.0f} % a token, 4.0 drafted a step" in line
    # prompt lookup (no draft model): the measurement alone; nothing drafted: no line
    assert speedup_lines(run, target, None, 4096, "f16", 0, rates=MEMORY_BOUND) == \
        ["speed-up: measured ×1.37 (vs plain decoding steps)"]
    assert speedup_lines({"draft_tokens": 0}, target, draft, 4096, "f16", 0, rates=MEMORY_BOUND) == []


def test_recommend_predicts_the_speed_up_with_a_draft_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from app.cli import main
    from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
    from app.core.predict.recommend import Machine

    hw = HardwareInfo(CPUInfo("a CPU", "x86_64", 8, 16, ["AVX2"]), 64 * GiB, 60 * GiB, [], True)
    monkeypatch.setattr(Machine, "from_system", classmethod(lambda cls, **_: Machine(hw, MEMORY_BOUND)))
    target, draft = zoo_path("llama-3.1-8b", "Q4_K_M", tmp_path), zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    assert main(["recommend", "-m", str(target), "--ctx", "4096", "--draft-model", str(draft), "--draft-max", "6",
                 "--json"]) == 0
    spec = json.loads(capsys.readouterr().out)["speculative"]
    assert spec["vocabulary"] is None  # the zoo's llama models share one vocabulary
    gains = [spec["speedup"][a] for a in ("0.5", "0.7", "0.9")]
    assert gains == sorted(gains) and gains[-1] > 1.0
    assert 0 < spec["break_even_acceptance"] < 0.7
    assert main(["recommend", "-m", str(target), "--ctx", "4096", "--draft-model", str(draft)]) == 0
    out = capsys.readouterr().out
    assert "with draft model zoo-llama-3.2-1b-Q4_K_M.gguf: predicted decode speed-up (draft 8 tokens a step)" in out
    # a draft with another vocabulary: predicted all the same, and the reason it cannot draft is said
    other = zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path)
    assert main(["recommend", "-m", str(target), "--draft-model", str(other)]) == 0
    assert "cannot draft for this model: different vocabulary sizes" in capsys.readouterr().out
