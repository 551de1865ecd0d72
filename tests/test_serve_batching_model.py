"""The batched-decode prediction: aggregate speed grows with the batch while memory-bound, then flattens at
the compute roof; arithmetic intensity grows with the batch."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from app.core.batching import predict_batch, stops_paying
from app.core.gguf_info import inspect_gguf
from app.core.speed import DeviceRates, Rates, predict


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


def test_each_stream_adds_a_column_of_every_weight_output_matrix_included(info) -> None:  # type: ignore[no-untyped-def]
    # llama.cpp's CPU kernels from two columns on: one pass over the weights plus a matrix-matrix column per
    # stream, and every stream's column goes through the output matrix (each needs its logits)
    out = "token_embd.weight" if info.tied_output else "output.weight"
    elements = sum(t.n_elements for t in info.tensors
                   if (t.name.startswith("blk.") and len(t.shape) >= 2) or t.name == out)
    width = info.n_embd / (info.n_embd + 740.0)
    column = 2 * elements / (100e9 * width)
    one, two, four, nine = predict_batch(info, rates(100, 30), [1, 2, 4, 9])
    assert four.step_s - two.step_s == pytest.approx(2 * column, rel=1e-6)
    assert nine.step_s - four.step_s == pytest.approx(5 * column, rel=1e-6)
    assert two.step_s - one.step_s == pytest.approx(2 * column, rel=1e-6)  # one stream is a matrix-vector step


def test_stops_paying() -> None:
    assert stops_paying([(1, 10.0), (2, 19.0), (4, 30.0), (8, 31.0)]) == 8
    assert stops_paying([(1, 10.0), (2, 19.0)]) is None
    # a dip is not the end when later counts still gain (measured on one thread, 2026-11-30)
    assert stops_paying([(1, 42.6), (2, 37.7), (4, 63.0), (8, 84.2), (16, 110.6)]) is None
    assert stops_paying([(1, 42.6), (2, 37.7), (4, 44.0), (8, 45.0)]) == 2
