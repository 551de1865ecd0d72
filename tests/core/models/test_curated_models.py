"""Discover's curated instruct models: the data is consistent, each shape gives the estimators what a real
header of that shape gives (checked against the zoo's files), and the verdicts follow the machine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import inspect_gguf
from app.core.hub import listing as hub
from app.core.models.curated import CURATED, assess_curated, best_pick, shape_info
from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
from app.core.predict.recommend import CPU, NONE, Candidate, Machine, recommend
from app.core.predict.speed import default_rates

SAME_SHAPE_IN_ZOO = {"Qwen2.5 0.5B Instruct": "qwen2.5-0.5b", "Llama 3.2 1B Instruct": "llama-3.2-1b",
                     "Gemma 2 2B it": "gemma-2-2b", "Llama 3.2 3B Instruct": "llama-3.2-3b",
                     "Mistral 7B Instruct v0.3": "mistral-7b", "Qwen2.5 7B Instruct": "qwen2.5-7b"}


def _machine(ram_gib: float) -> Machine:
    hw = HardwareInfo(CPUInfo("EPYC", "x86_64", 2, 2, ["AVX2"]), int(ram_gib * GiB), int(ram_gib * GiB), [], False)
    return Machine(hw, default_rates(hw, None))


def test_entries_are_consistent() -> None:
    titles = [m.title for m in CURATED]
    assert len(set(titles)) == len(titles) >= 8
    for m in CURATED:
        assert m.repo_id.count("/") == 1 and m.file.endswith(".gguf") and m.licence
        assert hub.quant_from_filename(m.file) == m.quant
        info = shape_info(m)
        # the listed download size agrees with the shape (a wrong layer count or width would not)
        assert abs(m.size - info.file_size) / m.size < 0.06, (m.title, m.size, info.file_size)
        assert abs(info.n_params / 1e9 - m.params_b) / m.params_b < 0.03, (m.title, info.n_params)


@pytest.mark.parametrize("title", sorted(SAME_SHAPE_IN_ZOO))
def test_shape_gives_what_a_real_header_gives(title: str, tmp_path: Path) -> None:
    m = next(m for m in CURATED if m.title == title)
    real = inspect_gguf(zoo_path(SAME_SHAPE_IN_ZOO[title], m.quant, tmp_path))
    mine = shape_info(m)
    for field in ("n_params", "n_layers", "n_head", "n_head_kv", "head_dim_k", "n_embd", "n_vocab", "tensor_bytes",
                  "layer_bytes", "token_embd_bytes", "output_bytes", "tied_output", "swa_layers", "sliding_window"):
        assert getattr(mine, field) == getattr(real, field), field
    machine = _machine(16)
    a = recommend([Candidate(real, size=m.size)], machine).variants[0]
    b = recommend([Candidate(mine, size=m.size)], machine).variants[0]
    assert (a.verdict, a.max_ctx, a.decode_tps, a.prefill_tps) == (b.verdict, b.max_ctx, b.decode_tps, b.prefill_tps)


def test_verdicts_follow_the_machine() -> None:
    small = {f.model.title: f for f in assess_curated(_machine(3))}
    big = {f.model.title: f for f in assess_curated(_machine(32))}
    assert [f.model.title for f in assess_curated(_machine(3))] == [m.title for m in CURATED]  # the list's order
    assert small["Qwen2.5 7B Instruct"].fit.verdict == NONE and not small["Qwen2.5 7B Instruct"].runs
    assert small["Qwen2.5 0.5B Instruct"].fit.verdict == CPU
    assert all(f.fit.verdict == CPU for f in big.values())
    assert big["Qwen2.5 0.5B Instruct"].fit.decode_tps > big["Qwen2.5 7B Instruct"].fit.decode_tps
    pick = best_pick(list(big.values()))
    assert pick is not None and pick.fit.decode_tps >= 8.0
    assert all(f.model.params_b <= pick.model.params_b for f in big.values() if f.fit.decode_tps >= 8.0)
    assert best_pick([dataclasses.replace(f) for f in small.values() if not f.runs]) is None
