"""app.core.sampling.chain: the same distribution as llama.cpp's own sampler chain, at a fraction of the cost.

The reference is llama.cpp itself: its penalties → top-k → typical → top-p → min-p → temp chain (as
llama-cpp-python builds it) applied to a full candidate array, survivors turned into probabilities. Every
sampler test runs twice: with the C top-k (app/core/sampling/_topk.c) and with the numpy path used where it is not
built."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from app.core.sampling import chain as sampling
from app.core.sampling.chain import Sampler, SamplerParams

N_VOCAB = 262_144  # Gemma 3's vocabulary: the size the shortcuts are for


@pytest.fixture(params=["native", "numpy"])
def top_k_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a sampler test through the C top-k and through the numpy fallback."""
    if request.param == "numpy":
        monkeypatch.setattr(sampling, "native_topk", None)
    else:
        assert sampling.native_topk is not None, "the set-up did not build app.core.sampling._topk (no C compiler?)"
    return str(request.param)


def llama_cpp_distribution(logits: np.ndarray, params: SamplerParams, accepted: list[int]) -> dict[int, float]:
    """Token → probability after llama.cpp's chain (everything but the final random draw)."""
    import llama_cpp as L  # a hard dependency: a broken install fails here, never skips
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())

    def add(s: object) -> None:
        L.llama_sampler_chain_add(chain, s)

    add(L.llama_sampler_init_penalties(logits.size, params.penalty_last_n, params.repeat_penalty,
                                       params.frequency_penalty, params.presence_penalty))
    if params.temperature > 0:
        add(L.llama_sampler_init_top_k(params.top_k))
        add(L.llama_sampler_init_typical(1.0, 1))
        add(L.llama_sampler_init_top_p(params.top_p, 1))
        add(L.llama_sampler_init_min_p(params.min_p, 1))
        add(L.llama_sampler_init_temp(params.temperature))
    for t in accepted:
        L.llama_sampler_accept(chain, t)
    data = np.zeros(logits.size, dtype=np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]))
    data["id"] = np.arange(logits.size)
    data["logit"] = logits
    cur = L.llama_token_data_array(data.ctypes.data_as(ctypes.POINTER(L.llama_token_data)), logits.size, -1, False)
    L.llama_sampler_apply(chain, ctypes.byref(cur))
    L.llama_sampler_free(chain)
    kept = data[: cur.size]
    if params.temperature == 0:
        best = kept[np.argmax(kept["logit"])]
        return {int(best["id"]): 1.0}
    w = np.exp(kept["logit"].astype(np.float64) - kept["logit"].max())
    return dict(zip(kept["id"].tolist(), (w / w.sum()).tolist(), strict=False))


def lm_like_logits(seed: int) -> np.ndarray:
    """Shaped like a real model's: a broad bulk ~45 logits wide, a handful of strong candidates on top."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 4.0, N_VOCAB).astype(np.float32)
    top = rng.choice(N_VOCAB, 60, replace=False)
    x[top] = (x.max() + rng.uniform(-6.0, 4.0, top.size)).astype(np.float32)
    return x


CASES = [
    SamplerParams(),  # llama-cpp-python's defaults
    SamplerParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1),  # Roofline's
    SamplerParams(temperature=1.5, top_k=100, top_p=0.9, min_p=0.0, repeat_penalty=1.3),
    SamplerParams(temperature=0.7, top_k=0, top_p=0.8, min_p=0.0),
    SamplerParams(temperature=0.8, top_k=0, top_p=0.95, min_p=0.05),  # min-p alone, a popular choice
    SamplerParams(temperature=1.2, top_k=0, top_p=1.0, min_p=0.02, repeat_penalty=1.1),
    SamplerParams(temperature=1.0, top_k=20, top_p=1.0, min_p=0.0, frequency_penalty=0.5, presence_penalty=0.4,
                  repeat_penalty=1.2),
    SamplerParams(temperature=0.0, repeat_penalty=1.5),
    SamplerParams(temperature=0.9, top_k=500, top_p=1.0, min_p=0.1),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"T{p.temperature}-k{p.top_k}-p{p.top_p}-m{p.min_p}"
                         f"-r{p.repeat_penalty}-f{p.frequency_penalty}")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_distribution_matches_llama_cpp_chain(params: SamplerParams, seed: int, top_k_path: str) -> None:
    logits = lm_like_logits(seed)
    order = np.argsort(-logits)
    # The reply so far repeats some of the strongest candidates (penalties must move the top), once or twice.
    accepted = [int(t) for t in order[:6]] + [int(order[0]), int(order[3])] + [int(t) for t in order[200:220]]
    ref = llama_cpp_distribution(logits, params, accepted)
    s = Sampler(params, N_VOCAB, seed=0)
    for t in accepted:
        s.accept(t)
    ids, probs = s.distribution(logits)
    ours = dict(zip(ids.tolist(), probs.tolist(), strict=False))
    assert abs(sum(ours.values()) - 1.0) < 1e-9
    for tok in set(ref) | set(ours):
        assert abs(ours.get(tok, 0.0) - ref.get(tok, 0.0)) < 2e-6, (tok, ours.get(tok), ref.get(tok))
    assert list(ids[: min(5, len(ids))]) == sorted(ours, key=lambda t: -ours[t])[:5]  # most likely first


def test_penalties_touch_only_the_window_and_never_the_callers_logits(top_k_path: str) -> None:
    logits = np.zeros(1000, dtype=np.float32)
    logits[7], logits[8] = 2.0, -2.0
    s = Sampler(SamplerParams(repeat_penalty=2.0, penalty_last_n=3), 1000, seed=0)
    for t in (7, 8, 9):
        s.accept(t)
    x = s.penalised(logits)
    assert (x[7], x[8]) == (1.0, -4.0)  # positive halves, negative doubles: both become less likely
    before = logits.copy()
    s.distribution(logits)  # penalises the row in place while it works, then puts it back
    assert np.array_equal(logits, before)
    for t in (1, 2, 3):  # 7 and 8 fall out of a 3-token window
        s.accept(t)
    x = s.penalised(logits)
    assert (x[7], x[8]) == (2.0, -2.0)


def test_greedy_takes_the_best_token_after_penalties(top_k_path: str) -> None:
    logits = np.arange(50, dtype=np.float32)  # 49 is best, 48 next
    s = Sampler(SamplerParams(temperature=0.0, repeat_penalty=1.1), 50, seed=0)
    assert s.sample(logits) == 49
    assert s.sample(logits) == 48  # 49 was accepted: 49/1.1 < 48


def test_same_seed_same_tokens_and_frequencies_follow_the_distribution(top_k_path: str) -> None:
    logits = np.full(1000, -10.0, dtype=np.float32)
    logits[:3] = np.log([0.5, 0.3, 0.2]).astype(np.float32)
    params = SamplerParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    draws = [Sampler(params, 1000, seed=42).sample(logits) for _ in range(3)]
    assert len(set(draws)) == 1
    s = Sampler(params, 1000, seed=7)
    counts = np.bincount([s.sample(logits) for _ in range(20_000)], minlength=1000)
    expected = np.array([0.5, 0.3, 0.2]) / (1.0 + 997 * np.exp(-10.0))  # the other 997 share ~4.3 %
    assert counts[:3] / 20_000 == pytest.approx(expected, abs=0.012)  # binomial sd ≤ 0.0036
    assert counts[3:].sum() / 20_000 == pytest.approx(1.0 - expected.sum(), abs=0.006)
    # the same through the small-candidate path (top-k 3): exactly the three, 0.5 / 0.3 / 0.2
    s = Sampler(SamplerParams(temperature=1.0, top_k=3, top_p=1.0, min_p=0.0), 1000, seed=8)
    counts = np.bincount([s.sample(logits) for _ in range(20_000)], minlength=1000)
    assert counts[3:].sum() == 0
    assert counts[:3] / 20_000 == pytest.approx([0.5, 0.3, 0.2], abs=0.012)


def test_top_p_and_min_p_cut_where_the_rules_say(top_k_path: str) -> None:
    logits = np.full(100, -50.0, dtype=np.float32)
    logits[:4] = np.log([0.5, 0.3, 0.15, 0.05]).astype(np.float32)
    ids, _ = Sampler(SamplerParams(temperature=1.0, top_k=0, top_p=0.8, min_p=0.0), 100, 0).distribution(logits)
    assert sorted(ids.tolist()) == [0, 1]  # 0.5 + 0.3 reaches 0.8
    ids, _ = Sampler(SamplerParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.2), 100, 0).distribution(logits)
    assert sorted(ids.tolist()) == [0, 1, 2]  # 0.05 < 0.2 × 0.5
    ids, p = Sampler(SamplerParams(temperature=1.0, top_k=2, top_p=1.0, min_p=0.0), 100, 0).distribution(logits)
    assert ids.tolist() == [0, 1] and p.tolist() == pytest.approx([0.625, 0.375])


def reference_top_k(x: np.ndarray, k: int) -> tuple[list[int], list[float]]:
    """The k largest non-NaN values, largest first, ties by lower id: a stable sort of everything."""
    ids = np.flatnonzero(~np.isnan(x))
    ids = ids[np.argsort(-x[ids], kind="stable")][:k]
    return ids.tolist(), x[ids].astype(np.float64).tolist()


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 1000, 4096, 10_001, N_VOCAB])
@pytest.mark.parametrize("k", [1, 3, 40, 300])
def test_native_top_k_is_exactly_the_k_largest(n: int, k: int) -> None:
    rng = np.random.default_rng(n * 1000 + k)
    # random values, plus whole blocks of equal values and repeated maxima: ties at the k-th value
    x = rng.normal(0.0, 4.0, n).astype(np.float32)
    x[rng.integers(0, n, max(1, n // 50))] = 3.0
    x[rng.integers(0, n, 5)] = x.max()
    assert sampling.native_topk.top_k(x, k) == reference_top_k(x, k)
    x[rng.integers(0, n, max(1, n // 3))] = np.nan  # NaNs are never chosen, even where few values are left
    x[rng.integers(0, n, max(1, n // 7))] = -np.inf
    assert sampling.native_topk.top_k(x, k) == reference_top_k(x, k)


def test_native_top_k_edges_and_bad_input() -> None:
    top_k = sampling.native_topk.top_k
    assert top_k(np.array([1.0, 5.0, 3.0, np.nan, 5.0, 2.0], np.float32), 3) == ([1, 4, 2], [5.0, 5.0, 3.0])
    assert top_k(np.array([np.nan, np.nan], np.float32), 2) == ([], [])
    assert top_k(np.zeros(0, np.float32), 5) == ([], [])
    assert top_k(np.ones(3, np.float32), 0) == ([], [])
    # every value in one block far above the rest: the block bound must not cut the block's own values
    x = np.zeros(100_000, np.float32)
    x[512:768] = np.arange(256, dtype=np.float32) + 10
    assert top_k(x, 100) == reference_top_k(x, 100)
    # the engine's row: a view through ctypes of llama.cpp's buffer (numpy says "<f", not "f")
    buf = (ctypes.c_float * 600)(*range(600))
    row = np.ctypeslib.as_array(ctypes.cast(buf, ctypes.POINTER(ctypes.c_float)), shape=(600,))
    assert top_k(row, 3) == ([599, 598, 597], [599.0, 598.0, 597.0])
    with pytest.raises(TypeError):
        top_k(np.ones(3, np.dtype(">f4")), 2)  # the wrong byte order
    with pytest.raises(ValueError):
        top_k(np.ones(3, np.float32), -1)
    with pytest.raises(TypeError):
        top_k(np.ones(3, np.float64), 2)
    with pytest.raises((TypeError, ValueError, BufferError)):
        top_k(np.ones(10, np.float32)[::2], 2)  # not contiguous


def test_sampler_takes_the_numpy_path_for_rows_the_c_function_cannot_read(top_k_path: str) -> None:
    logits = lm_like_logits(5)
    params = SamplerParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)
    ids32, p32 = Sampler(params, N_VOCAB, seed=0).distribution(logits)
    ids64, p64 = Sampler(params, N_VOCAB, seed=0).distribution(logits.astype(np.float64))
    strided = np.repeat(logits, 2)[::2]  # the same values, not contiguous
    ids_s, p_s = Sampler(params, N_VOCAB, seed=0).distribution(strided)
    assert ids32.tolist() == ids64.tolist() == ids_s.tolist()
    assert p32 == pytest.approx(p64, abs=1e-7) and p32 == pytest.approx(p_s, abs=1e-7)
