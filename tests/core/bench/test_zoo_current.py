"""The 2025-26 zoo families in llama.cpp: each loads with its intended shapes (layer kinds, heads, experts,
sliding window, recurrent state), and llama.cpp's own buffers equal the memory estimate within 2 % for KV f16,
q8_0 and q4_0, weights read in and mapped — with the MXFP4 experts repacked, the repacked copy of a tied Q4_0
output, and the recurrent layers' RS buffer exact. The big ones are cut to their first layers (a load takes the
file's size in RAM); scripts/memory_zoo.py runs the same comparison at full size where RAM allows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.zoo import ZOO, ZooSpec, write_zoo_model
from app.core.gguf.info import inspect_gguf
from app.core.predict.memory import MemoryConfig, MiB, estimate_memory

# (key, layers kept (0: all), a uniform type for every matrix or None: the release's mix)
CURRENT = [("gpt-oss-20b", 2, None), ("qwen3-30b-a3b", 2, None), ("qwen3-8b", 2, None), ("gemma-3-4b", 6, None),
           ("gemma-3-4b", 6, "Q4_0"), ("lfm2-1.2b", 0, None), ("granite-4.0-h-micro", 6, None)]


@pytest.fixture(scope="module")
def current(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[ZooSpec, Path]]:
    d = tmp_path_factory.mktemp("zoo-current")
    out = []
    for key, layers, uniform in CURRENT:
        spec = dataclasses.replace(ZOO[key], n_layers=layers) if layers else ZOO[key]
        name = f"{key}-{layers or spec.n_layers}l-{uniform or spec.release}.gguf"
        out.append((spec, write_zoo_model(spec, spec.release, d / name, uniform=uniform)))
    return out


@pytest.mark.model
def test_llama_cpp_reads_the_intended_shapes(current: list[tuple[ZooSpec, Path]]) -> None:
    import ctypes

    import llama_cpp

    llama_cpp.llama_backend_init()
    for spec, path in current:
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
        assert model, spec.key
        try:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_model_meta_val_str(model, f"{spec.arch}.expert_count".encode(), buf, 64)
            got = {
                "n_layer": llama_cpp.llama_model_n_layer(model), "n_head": llama_cpp.llama_model_n_head(model),
                "n_embd": llama_cpp.llama_model_n_embd(model),
                "n_vocab": llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)),
                "n_expert": int(buf.value) if n > 0 else 0, "n_swa": llama_cpp.llama_model_n_swa(model),
                "recurrent": bool(llama_cpp.llama_model_is_hybrid(model)),
                "n_params": llama_cpp.llama_model_n_params(model),
            }
        finally:
            llama_cpp.llama_model_free(model)
        info = inspect_gguf(path)
        assert got == {"n_layer": spec.n_layers, "n_head": spec.n_head, "n_embd": spec.n_embd,
                       "n_vocab": spec.n_vocab, "n_expert": spec.n_expert, "n_swa": spec.sliding_window,
                       "recurrent": bool(spec.recurrent), "n_params": info.n_params}, spec.key


@pytest.mark.model
def test_memory_matches_llama_cpp_in_every_mode(current: list[tuple[ZooSpec, Path]]) -> None:
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    with EngineClient() as engine:
        for spec, path in current:
            info = inspect_gguf(path)
            for kv in ("f16", "q8_0", "q4_0"):
                for mmap in (False, True):
                    loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=4096, n_threads=2, type_k=kv,
                                                      type_v=kv, warmup=False, use_mmap=mmap))
                    got = loaded.buffers_mib
                    case = (spec.key, kv, "mapped" if mmap else "read in", got)
                    assert loaded.architecture == spec.arch and loaded.n_vocab == spec.n_vocab
                    est = estimate_memory(info, MemoryConfig(n_ctx=4096, type_k=kv, type_v=kv, use_mmap=mmap,
                                                             flash_attn=loaded.flash_attn), has_gpu=False)
                    assert est.cpu.total == pytest.approx(sum(got.values()) * MiB, rel=0.02), case
                    # the parts llama.cpp names: KV and RS to its printed 0.01 MiB, the repacked copy within 0.1 %
                    kv_got = sum(v for k, v in got.items() if k.startswith("KV:"))
                    assert est.kv_bytes / MiB == pytest.approx(kv_got, abs=0.01 * len(est.caches)), case
                    rs_got = sum(v for k, v in got.items() if k.startswith("RS:"))
                    assert est.cpu.state / MiB == pytest.approx(rs_got, abs=0.01), case
                    assert (rs_got > 0) == bool(spec.recurrent), case
                    repack_got = sum(v for k, v in got.items() if "REPACK" in k)
                    assert est.cpu.repack / MiB == pytest.approx(repack_got, rel=0.001, abs=0.01), case
