"""A full-size zoo model (sparse Qwen2.5-7B Q4_K_M, 4.7 GB of which a few MB on disk) through the real engine:
llama.cpp reads the intended shapes, and its own buffers (mapped weights, the repacked Q4_K copy, KV, compute,
output) equal the memory estimate. Slow: llama.cpp pre-faults the 4.7 GB mapping and repacks ~3.5 GB of Q4_K
(about a minute on the 2-core development VM, ~8 GB of RAM while it runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.bench.zoo import ZOO, zoo_path
from app.core.gguf.info import inspect_gguf
from app.core.predict.memory import MemoryConfig, MiB, estimate_memory

KEY, QUANT = "qwen2.5-7b", "Q4_K_M"


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_full_size_7b_loads_with_its_shapes_and_memory(tmp_path: Path) -> None:
    import psutil

    spec = ZOO[KEY]
    path = zoo_path(spec, QUANT, tmp_path)
    info = inspect_gguf(path)
    est = estimate_memory(info, MemoryConfig(n_ctx=1024), has_gpu=False)
    assert path.stat().st_blocks * 512 < 64 * MiB < est.cpu.total  # sparse on disk, full size in memory
    if psutil.virtual_memory().available < 1.5 * est.cpu.total:
        pytest.fail(f"needs {est.cpu.total / 2**30:.1f} GiB of RAM free to load the 7B (a machine too small for "
                    f"this test: deselect it with -m 'not slow')")

    from app.engine import protocol as P
    from app.engine.client import EngineClient

    with EngineClient() as engine:
        loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=1024, n_threads=2, warmup=False))
        assert loaded.n_vocab == spec.n_vocab == 152064 and loaded.architecture == spec.arch == "qwen2"
        assert loaded.n_params == info.n_params
        reported = sum(loaded.buffers_mib.values()) * MiB
        assert est.cpu.total == pytest.approx(reported, rel=0.02), loaded.buffers_mib
        assert any("REPACK" in k for k in loaded.buffers_mib), loaded.buffers_mib  # the repacked Q4_K copy
        kv_reported = sum(v for k, v in loaded.buffers_mib.items() if k.startswith("KV:")) * MiB
        assert est.kv_bytes == pytest.approx(kv_reported, abs=0.01 * MiB)
        # the shapes as llama.cpp read them: its metadata, and a KV cache of exactly
        # 28 layers x (K + V) x 4 KV heads x 128 head size x f16 x the cells it allocated
        meta = loaded.metadata
        got = tuple(int(meta[f"qwen2.{k}"]) for k in ("block_count", "attention.head_count",
                                                      "attention.head_count_kv", "embedding_length"))
        assert got == (spec.n_layers, spec.n_head, spec.n_head_kv, spec.n_embd) == (28, 28, 4, 3584)
        assert loaded.kv_bytes_allocated == 28 * 2 * 4 * 128 * 2 * loaded.kv_cells_allocated
