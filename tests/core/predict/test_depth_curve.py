"""Decode speed versus context depth (app.core.predict.depth): full-attention layers slow down as the cache
fills, sliding-window layers stop at their window, recurrent layers never do; the UI's line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import GGUFInfo, inspect_gguf
from app.core.predict.depth import (
    DepthPoint,
    curve_line,
    decode_at,
    depth_curve,
    depth_steps,
    depth_summary,
    drop,
    fmt_tokens,
    layer_kinds,
)
from app.core.predict.memory import MemoryConfig
from app.core.predict.rates import ATTENTION_READ_SLOWDOWN
from app.core.predict.speed import DeviceRates, Rates


def cpu_rates() -> Rates:
    return Rates(DeviceRates("cpu", 20.0, 0.6, 0.001, 100e9))


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(scope="module")
def llama1b(zoo_dir: Path) -> GGUFInfo:
    return inspect_gguf(zoo_path("llama-3.2-1b", "Q4_K_M", zoo_dir))


@pytest.fixture(scope="module")
def gemma2(zoo_dir: Path) -> GGUFInfo:
    return inspect_gguf(zoo_path("gemma-2-2b", "Q4_K_M", zoo_dir))


def test_full_attention_slows_with_depth_by_its_kv_bytes(llama1b: GGUFInfo) -> None:
    cfg = MemoryConfig(n_ctx=32768)
    rates = cpu_rates()
    points = depth_curve(llama1b, rates, cfg, [0, 4096, 16384])
    tps = [p.decode_tps for p in points]
    assert tps[0] > tps[1] > tps[2]
    # memory-bound: the time grows by the KV bytes read over the effective bandwidth (16 layers, 8 KV heads × 64,
    # K and V in f16), at least; the attention products can only add to that
    kv_per_token = 16 * 2 * 8 * 64 * 2
    extra_s = 1 / tps[2] - 1 / tps[0]
    assert extra_s >= 0.95 * kv_per_token * 16384 / (20e9 * 0.6)
    assert drop(llama1b, rates, cfg, 16384) == pytest.approx(tps[2] / tps[0])


def test_decode_attention_adds_its_slower_reads_and_its_products(llama1b: GGUFInfo) -> None:
    # llama.cpp's attention over a long cache neither streams like a weight matrix nor hides its reads behind its
    # head_dim-long products: the time depth adds is the KV bytes at the bandwidth, slowed, plus the K and V
    # products of every query head at the F16 kernel's rate. Llama 3.2 1B: 16 layers of 32 query heads and
    # 8 KV heads of 64.
    rates = Rates(DeviceRates("cpu", 20.0, 0.6, 0.001, 100e9, decode_rates={"*": 10e9, "F16": 4e9}))
    cfg = MemoryConfig(n_ctx=32768)
    extra_s = 1 / decode_at(llama1b, rates, cfg, 16384) - 1 / decode_at(llama1b, rates, cfg, 0)
    reads = 16 * 16384 * (8 * 64 * 2 * 2) / (20e9 * 0.6)
    products = 16 * 16384 * 32 * (64 + 64) / 4e9
    assert ATTENTION_READ_SLOWDOWN > 1
    assert extra_s == pytest.approx(ATTENTION_READ_SLOWDOWN * reads + products, rel=0.01)


def test_sliding_window_layers_stop_growing_at_the_window(gemma2: GGUFInfo) -> None:
    kinds = layer_kinds(gemma2)
    assert (kinds.full, kinds.window, kinds.recurrent, kinds.window_size) == (13, 13, 0, 4096)
    cfg = MemoryConfig(n_ctx=8192, swa_full=False)
    rates = cpu_rates()
    t = {d: 1 / decode_at(gemma2, rates, cfg, d) for d in (0, 2048, 4096, 6144, 8000)}
    below = t[4096] - t[2048]  # both kinds grow
    above = t[8000] - t[6144]  # only the full layers grow (over about as many tokens)
    assert above < 0.6 * below * (8000 - 6144) / 2048


def test_recurrent_layers_do_not_slow_down(llama1b: GGUFInfo) -> None:
    # a hybrid: every other layer keeps a recurrent state instead of a KV cache
    hybrid = dataclasses.replace(llama1b, n_head_kv=[0 if il % 2 else 8 for il in range(16)])
    flat = dataclasses.replace(llama1b, n_head_kv=[0] * 16)
    assert layer_kinds(hybrid).recurrent == 8
    cfg, rates = MemoryConfig(n_ctx=16384), cpu_rates()
    def added_s(info: GGUFInfo) -> float:  # the time depth adds to a token
        return 1 / decode_at(info, rates, cfg, 16000) - 1 / decode_at(info, rates, cfg, 0)

    assert added_s(hybrid) == pytest.approx(added_s(llama1b) / 2, rel=0.01)
    assert drop(hybrid, rates, cfg, 16000) > drop(llama1b, rates, cfg, 16000)
    assert drop(flat, rates, cfg, 16000) == pytest.approx(1.0, abs=1e-3)
    assert "no layer keeps a KV cache" in depth_summary(flat, rates, cfg)


def test_steps_reach_the_chosen_context() -> None:
    assert depth_steps(8192) == [0, 1024, 2048, 4096, 8192]
    assert depth_steps(1) == [0, 1]


def test_line_and_token_counts() -> None:
    assert [fmt_tokens(n) for n in (512, 3100, 8192, 32768, 1536)] == ["512", "3.1k", "8k", "32k", "1.5k"]
    pts = [DepthPoint(d, 40 - d / 1024) for d in (0, 1024, 2048, 4096, 8192)]
    assert curve_line(pts) == "at 0: 40 tok/s, at 2k: 38 tok/s, at 8k: 32 tok/s"
    assert curve_line([]) == ""
    assert curve_line([DepthPoint(0, 4.25), DepthPoint(8192, 12.0)]) == "at 0: 4.2 tok/s, at 8k: 12 tok/s"


def test_summary_names_the_layer_kinds(gemma2: GGUFInfo) -> None:
    line = depth_summary(gemma2, cpu_rates(), MemoryConfig(n_ctx=8192))
    assert line.startswith("decode at 0: ")
    assert "13 full-attention + 13 sliding-window (4096) layers" in line and "falls as the KV cache fills" in line
