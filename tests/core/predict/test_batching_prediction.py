"""The batched-decode prediction: aggregate speed grows with the batch while memory-bound, then flattens at
the compute roof; arithmetic intensity grows with the batch."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import inspect_gguf
from app.core.predict.attention import attention_at
from app.core.predict.batching import predict_batch, stops_paying, unified_span
from app.core.predict.memory import MemoryConfig
from app.core.predict.speed import DeviceRates, Rates, predict, weight_groups


@pytest.fixture(scope="module")
def info(default_model: Path):  # type: ignore[no-untyped-def]
    return inspect_gguf(default_model)


def rates(prefill_gflops: float, decode_gweights: float) -> Rates:
    """Every type at one matrix-matrix rate (FLOP/s) and one matrix-vector rate (weights/s)."""
    return Rates(DeviceRates("cpu", 10.0, 0.65, 0.001, prefill_gflops * 1e9, decode_rates={"*": decode_gweights * 1e9},
                             prefill_rates={"*": prefill_gflops * 1e9}))


def test_one_stream_is_the_single_request_prediction(info) -> None:  # type: ignore[no-untyped-def]
    r = rates(100, 30)
    one = predict_batch(info, r, [1])[0]
    assert one.aggregate_tps == pytest.approx(predict(info, r, depth=0, n_gen=1).decode_tps, rel=1e-6)


def test_memory_bound_batches_multiply_then_the_compute_roof_flattens(info) -> None:  # type: ignore[no-untyped-def]
    points = predict_batch(info, rates(5000, 30), [1, 2, 4, 16, 64, 256, 1024, 4096, 16384])  # fast matrix roof
    agg = [p.aggregate_tps for p in points]
    assert agg[1] > 1.8 * agg[0]  # 2 streams: nearly the cost of one step
    assert all(b >= a for a, b in itertools.pairwise(agg))
    assert points[0].bound == "memory bandwidth" and points[-1].bound == "compute"
    assert agg[-1] < 1.3 * agg[-2]  # past the roof an extra sequence costs its full compute
    assert all(b.intensity > a.intensity for a, b in itertools.pairwise(points))
    assert points[-1].per_stream_tps < points[0].per_stream_tps
    n = stops_paying([(p.streams, p.aggregate_tps) for p in points])
    assert n is not None and n > 1


def _matrices(info) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(weights, output rows) of the products a token goes through, the output matrix included."""
    out = "token_embd.weight" if info.tied_output else "output.weight"
    mats = [t for t in info.tensors if (t.name.startswith("blk.") and len(t.shape) >= 2) or t.name == out]
    return sum(t.n_elements for t in mats), sum(t.n_elements / t.shape[0] for t in mats)


def test_each_stream_is_a_column_of_every_weight_and_row_at_the_rate_measured_for_its_width(info) -> None:  # type: ignore[no-untyped-def]
    # a step of B tokens multiplies every matrix, the output matrix included (each stream needs its logits), by
    # B columns at the kernel rate llama.cpp reaches with B columns (the largest measured width <= B), and pays
    # a fixed cost per output row and column
    table = {2: (10e9, 0.0), 4: (20e9, 500.0), 16: (40e9, 100.0)}
    r = DeviceRates("cpu", 1e9, 1.0, 0.002, 1e30, decode_rates={"*": 30e9}, prefill_rates={"*": 100e9},
                    batch_rates={"*": table})  # endless bandwidth and attention: the kernels alone
    elements, rows = _matrices(info)
    for b, (rate, row) in [(2, table[2]), (3, table[2]), (4, table[4]), (9, table[4]), (16, table[16]),
                           (64, table[16])]:
        point = predict_batch(info, Rates(r), [b])[0]
        assert point.step_s == pytest.approx(0.002 + b * (elements + row * rows) / rate, rel=1e-6), b
        assert point.bound == "compute"
    # without a measured table: the decode kernel once per column below 16 columns, the prefill rate from there
    plain = DeviceRates("cpu", 1e9, 1.0, 0.0, 1e30, decode_rates={"*": 30e9}, prefill_rates={"*": 100e9})
    assert predict_batch(info, Rates(plain), [8])[0].step_s == pytest.approx(8 * elements / 30e9, rel=1e-6)
    wide = 100e9 / 2 * info.n_embd / (info.n_embd + 740.0)  # a narrow model's element-wise share, as in prefill
    assert predict_batch(info, Rates(plain), [16])[0].step_s == pytest.approx(16 * elements / wide, rel=1e-6)


def test_a_unified_cache_makes_every_token_attend_over_every_streams_cells(info) -> None:  # type: ignore[no-untyped-def]
    assert ([unified_span(1, 10), unified_span(4, 64), unified_span(16, 42), unified_span(2, 300)]
            == [256, 256, 768, 768])
    r = DeviceRates("cpu", 1e30, 1.0, 0.0, 50e9, decode_rates={"*": 1e30}, prefill_rates={"*": 1e30},
                    batch_rates={"*": {2: (1e30, 0.0)}})  # attention alone
    cfg = MemoryConfig(n_gpu_layers=0, n_ctx=8192)
    for b, depth in [(2, 100), (8, 100), (16, 42)]:
        _, weights = attention_at(info, cfg, unified_span(b, depth))
        step = predict_batch(info, Rates(r), [b], cfg, depth=depth)[0].step_s
        assert step == pytest.approx(2 * b * weights / 50e9, rel=1e-6)  # b queries, each over all b streams' cells
    eight, sixteen = (predict_batch(info, Rates(r), [b], cfg, depth=200)[0].step_s for b in (8, 16))
    assert sixteen > 3 * eight  # twice the queries over twice the cells (until the sliding windows cap them)


def test_a_batch_of_moe_tokens_reads_every_expert_any_of_them_is_routed_to(tmp_path: Path) -> None:
    info = inspect_gguf(zoo_path("olmoe-1b-7b", "Q4_K_M", tmp_path))  # sparse: a few MB on disk
    r = DeviceRates("cpu", 1.0, 1.0, 0.0, 1e30, decode_rates={"*": 1e30}, prefill_rates={"*": 1e30},
                    batch_rates={"*": {2: (1e30, 0.0)}})  # 1 GB/s, endless compute: the step is its bytes
    groups = weight_groups(info, MemoryConfig(n_gpu_layers=0), has_gpu=False)["cpu"]
    active, every = sum(g.bytes for g in groups.values()), sum(g.bytes_all for g in groups.values())
    one, two, many = (predict_batch(info, Rates(r), [b])[0].step_s for b in (1, 2, 512))
    share = info.expert_used_count / info.expert_count
    expert_bytes = (every - active) / (1 - share)
    kv, _ = attention_at(info, MemoryConfig(n_gpu_layers=0), 256)  # the cells attended (padded to 256), read once
    assert one * 1e9 == pytest.approx(active, rel=1e-6)
    assert two * 1e9 == pytest.approx(active + ((1 - (1 - share) ** 2) - share) * expert_bytes + kv, rel=1e-6)
    assert many * 1e9 == pytest.approx(every + kv, rel=1e-6)  # 512 tokens touch every expert


def test_stops_paying() -> None:
    assert stops_paying([(1, 10.0), (2, 19.0), (4, 30.0), (8, 31.0)]) == 8
    assert stops_paying([(1, 10.0), (2, 19.0)]) is None
    # a dip is not the end when later counts still gain (measured on one thread, 2026-11-30)
    assert stops_paying([(1, 42.6), (2, 37.7), (4, 63.0), (8, 84.2), (16, 110.6)]) is None
    assert stops_paying([(1, 42.6), (2, 37.7), (4, 44.0), (8, 45.0)]) == 2
