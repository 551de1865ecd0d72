"""MoE prompt batches: each expert multiplies only the tokens routed to it (llama.cpp's mul_mat_id), so the
experts' share of a prefill runs at MOE_PREFILL_EFFICIENCY of a dense matmul's rate; decode is unaffected."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import inspect_gguf
from app.core.predict import rates as speed_rates
from app.core.predict import speed
from app.core.predict.memory import MemoryConfig
from app.core.predict.speed import DeviceRates, Rates, cost_parts, weight_groups


def test_experts_prefill_at_their_own_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = inspect_gguf(zoo_path("olmoe-1b-7b", "Q4_K_M", tmp_path))  # sparse: a few MB on disk
    rates = Rates(DeviceRates("cpu", 20.0, 1.0, 0.0, 100e9, prefill_rates={"*": 100e9}, decode_rates={"*": 10e9}))
    cfg = MemoryConfig(n_ctx=2048)
    groups = weight_groups(info, cfg, has_gpu=False)["cpu"]
    experts = sum(g.expert_elements for g in groups.values())
    dense = sum(g.elements for g in groups.values()) - experts
    assert experts > 2 * dense  # OLMoE: the active experts are most of the multiplied weights
    slow = sum(cost_parts(info, rates, cfg, n_prompt=512)["cpu"].alu)
    monkeypatch.setattr(speed, "MOE_PREFILL_EFFICIENCY", 1.0)
    plain = sum(cost_parts(info, rates, cfg, n_prompt=512)["cpu"].alu)
    eff = speed_rates.MOE_PREFILL_EFFICIENCY
    rate = 100e9 * info.n_embd / (info.n_embd + speed_rates.PREFILL_WIDTH)  # narrow models: element-wise share
    assert eff < 1 and slow - plain == pytest.approx(2 * 512 * experts * (1 / eff - 1) / rate, rel=1e-6)
    decode = sum(cost_parts(info, rates, cfg)["cpu"].alu)
    monkeypatch.setattr(speed, "MOE_PREFILL_EFFICIENCY", 0.3)
    assert sum(cost_parts(info, rates, cfg)["cpu"].alu) == decode  # one token: no batch to split
