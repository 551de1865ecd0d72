"""The model zoo: sparse GGUFs with real shapes load in llama.cpp with the intended shapes, take almost no
disk, carry llama.cpp-style quantization mixes, and their memory estimates match llama.cpp's own buffers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.zoo import (
    QUANTS,
    ZOO,
    ZooSpec,
    kernel_probe,
    quants_for,
    tensor_type,
    write_zoo_model,
    zoo_path,
)
from app.core.gguf.info import inspect_gguf
from app.core.predict.memory import MemoryConfig, estimate_memory

MiB = 1 << 20


def test_every_zoo_model_has_its_published_shape(tmp_path: Path) -> None:
    for spec in ZOO.values():
        path = write_zoo_model(spec, spec.release, tmp_path)
        info = inspect_gguf(path)
        assert info.architecture == spec.arch and info.n_layers == spec.n_layers
        assert set(info.n_head) == {spec.n_head}
        # hybrids: KV heads only in the attention layers, 0 where a layer keeps a recurrent state
        kv = [0 if spec.recurrent and il not in spec.attn_layers else spec.n_head_kv for il in range(spec.n_layers)]
        assert info.n_head_kv == kv
        assert info.head_dim_k == spec.head_dim and info.n_vocab == spec.n_vocab and info.n_embd == spec.n_embd
        assert info.tied_output == spec.tied and info.expert_count == spec.n_expert
        assert info.expert_used_count == spec.n_expert_used
        assert info.file_type == {"MXFP4": "MXFP4_MOE"}.get(spec.release, spec.release)
        # the parameter count the model card gives, from the tensor shapes alone
        assert info.n_params / 1e9 == pytest.approx(spec.params_b, rel=0.02), spec.key
        # sparse: gigabytes long, a few MB on disk
        st = path.stat()
        assert st.st_size == info.data_offset + info.tensor_bytes
        assert st.st_blocks * 512 < 16 * MiB, spec.key
        path.unlink()


def test_quantization_mixes_follow_llama_cpp() -> None:
    # Q4_K_M: the output (or a tied embedding) is Q6_K, attn_v/ffn_down get Q6_K in the first and last
    # eighth and every third layer between, the rest Q4_K
    assert tensor_type("Q4_K_M", "token_embd.weight", 2048, 16, tied=True) == "Q6_K"
    assert tensor_type("Q4_K_M", "token_embd.weight", 4096, 32, tied=False) == "Q4_K"
    assert tensor_type("Q4_K_M", "output.weight", 4096, 32, tied=False) == "Q6_K"
    more = [il for il in range(16) if tensor_type("Q4_K_M", f"blk.{il}.attn_v.weight", 2048, 16, False) == "Q6_K"]
    assert more == [0, 1, 4, 7, 10, 13, 14, 15]
    assert tensor_type("Q4_K_M", "blk.3.attn_q.weight", 2048, 16, False) == "Q4_K"
    # rows that are not a multiple of 256 fall back as llama.cpp does (Qwen2.5-0.5B's 896-wide rows)
    assert tensor_type("Q4_K_M", "blk.3.attn_q.weight", 896, 24, False) == "Q5_0"
    assert tensor_type("Q4_K_M", "token_embd.weight", 896, 24, tied=True) == "Q8_0"
    assert tensor_type("Q4_0", "output.weight", 4096, 32, False) == "Q6_K"
    assert tensor_type("Q8_0", "output.weight", 4096, 32, False) == "Q8_0"
    assert tensor_type("Q8_0", "blk.0.ffn_gate_inp.weight", 2048, 16, False) == "F32"  # MoE router
    assert tensor_type("F16", "blk.0.attn_norm.weight", 2048, 16, False) == "F32"
    assert quants_for(ZOO["llama-3.2-1b"]) == tuple(q for q in QUANTS if q != "MXFP4")
    assert "F16" not in quants_for(ZOO["llama-3.1-8b"]) and "MXFP4" in quants_for(ZOO["gpt-oss-20b"])
    with pytest.raises(ValueError):
        write_zoo_model("llama-3.2-1b", "Q3_K_S", "/nonexistent")
    with pytest.raises(ValueError, match="mixture-of-experts"):
        write_zoo_model("llama-3.2-1b", "MXFP4", "/nonexistent")
    # MXFP4 (gpt-oss's release): experts in MXFP4, the other matrices Q8_0, vectors and sinks F32
    assert tensor_type("MXFP4", "blk.0.ffn_down_exps.weight", 2880, 24, False) == "MXFP4"
    assert tensor_type("MXFP4", "blk.0.attn_q.weight", 2880, 24, False) == "Q8_0"
    assert tensor_type("MXFP4", "output.weight", 2880, 24, False) == "Q8_0"
    for name in ("blk.0.attn_sinks.weight", "blk.0.ffn_up_exps.bias", "blk.0.ssm_a", "blk.0.ssm_conv1d.weight",
                 "blk.0.shortconv.conv.weight", "token_embd_norm.weight"):
        assert tensor_type("Q4_K_M", name, 4096, 24, False) == "F32", name
    assert tensor_type("Q4_K_M", "blk.0.ssm_in.weight", 2048, 40, True) == "Q4_K"


def test_a_uniform_file_has_every_matrix_in_one_type(tmp_path: Path) -> None:
    # the batch kernel benchmark's files (scripts/bench_batch_kernels): one type for every product
    info = inspect_gguf(write_zoo_model("llama-3.2-1b", "Q4_K_M", tmp_path / "u.gguf", uniform="Q5_0"))
    types = {t.ggml_type for t in info.tensors if len(t.shape) >= 2}
    assert types == {"Q5_0"} and {t.ggml_type for t in info.tensors if len(t.shape) == 1} == {"F32"}
    mixed = inspect_gguf(write_zoo_model("llama-3.2-1b", "Q4_K_M", tmp_path / "m.gguf"))
    assert {t.ggml_type for t in mixed.tensors if len(t.shape) >= 2} == {"Q4_K", "Q6_K"}


def test_the_kernel_probe_is_a_short_model_of_the_1b_width(tmp_path: Path) -> None:
    # calibration's prompt-batch probes: Llama-3.2-1B's matrices, 4 layers, every layer matrix in the quant's type
    info = inspect_gguf(zoo_path(kernel_probe(), "Q8_0", tmp_path))
    full = inspect_gguf(zoo_path("llama-3.2-1b", "Q8_0", tmp_path))
    assert info.n_layers == 4 and info.n_embd == full.n_embd == 2048 and info.n_ff == full.n_ff
    assert {t.ggml_type for t in info.tensors if t.name.startswith("blk.") and len(t.shape) >= 2} == {"Q8_0"}
    def layers(i: object) -> list[tuple[str, int]]:
        return [(t.name, t.n_bytes) for t in i.tensors if t.name.startswith("blk.")]  # type: ignore[attr-defined]

    assert layers(info) == [(n, b) for n, b in layers(full) if int(n.split(".")[1]) < 4]  # the 1B's first 4 layers
    assert info.n_vocab == 32768  # a short vocabulary: the probe times the layers' kernels
    assert kernel_probe(2).n_layers == 2 and ZOO["llama-3.2-1b"].n_layers == 16  # the zoo's own entry untouched


@pytest.mark.parametrize("quant", ["Q8_0", "Q4_K_M", "F16"])
def test_filled_weights_are_random_blocks_under_a_small_scale(tmp_path: Path, quant: str) -> None:
    # a tiny shape of the same architecture; every type the mixes use gets data of its own layout
    import gguf
    import numpy as np

    tiny = dataclasses.replace(ZOO["llama-3.2-1b"], key="tiny", n_layers=2, n_embd=256, n_ff=512, n_head=4,
                               n_head_kv=2, n_vocab=1024)
    path = zoo_path(tiny, quant, tmp_path, random_weights=True)
    assert path.parent.name == "filled" and not path.with_suffix(".tmp").exists()
    assert zoo_path(tiny, quant, tmp_path, random_weights=True).stat().st_mtime_ns == path.stat().st_mtime_ns
    reader = gguf.GGUFReader(path)
    seen = set()
    for t in reader.tensors:
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        kind = t.tensor_type.name
        seen.add(kind)
        if kind == "F32":
            assert np.all(raw.view(np.float32) == 1.0), t.name  # norms of one
            continue
        assert np.count_nonzero(raw) > 0.9 * raw.size, t.name  # not zeros any more
        if kind == "F16":
            values = raw.view(np.float16).astype(np.float32)
            assert np.isfinite(values).all() and 0.01 < values.std() < 0.03
        else:
            block = gguf.GGML_QUANT_SIZES[t.tensor_type][1]
            blocks = raw.reshape(-1, block)
            d = blocks[:, -2:] if kind == "Q6_K" else blocks[:, :2]
            assert np.all(d.copy().view(np.float16) == np.float16(0.002)), t.name
    assert seen >= {"F32", {"Q8_0": "Q8_0", "Q4_K_M": "Q4_K", "F16": "F16"}[quant]}
    assert (inspect_gguf(path).tensor_bytes
            == inspect_gguf(write_zoo_model(tiny, quant, tmp_path / "z.gguf")).tensor_bytes)


def test_file_size_tracks_the_quantization(tmp_path: Path) -> None:
    sizes = {q: zoo_path("llama-3.2-1b", q, tmp_path).stat().st_size for q in quants_for(ZOO["llama-3.2-1b"])}
    assert sizes["Q4_0"] < sizes["Q4_K_M"] < sizes["Q6_K"] < sizes["Q8_0"] < sizes["F16"]
    assert sizes["F16"] / 1e9 == pytest.approx(1.24 * 2, rel=0.03)
    assert zoo_path("llama-3.2-1b", "Q8_0", tmp_path).stat().st_mtime > 0  # written once, then reused


# Loaded by llama.cpp in these tests: the small zoo models, and the two unusual architectures cut to a few
# layers (llama.cpp maps and pre-faults the whole file, so a 7 GB MoE would cost 7 GB of page cache here).
# Every full-size zoo file was loaded the same way by hand, see docs/estimates.md.
LOADED = [("qwen2.5-0.5b", "Q4_K_M", 0), ("llama-3.2-1b", "Q4_0", 0), ("gemma-2-2b", "Q4_0", 4),
          ("olmoe-1b-7b", "Q8_0", 2)]


@pytest.fixture(scope="module")
def loaded_zoo(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[ZooSpec, Path]]:
    d = tmp_path_factory.mktemp("zoo")
    out = []
    for key, quant, layers in LOADED:
        spec = dataclasses.replace(ZOO[key], n_layers=layers) if layers else ZOO[key]
        out.append((spec, write_zoo_model(spec, quant, d)))
    return out


@pytest.mark.model
def test_llama_cpp_reads_the_intended_shapes(loaded_zoo: list[tuple[ZooSpec, Path]]) -> None:
    """llama.cpp's own hyperparameters for the file (a model load, no context)."""
    import ctypes

    import llama_cpp

    llama_cpp.llama_backend_init()
    for spec, path in loaded_zoo:
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
        assert model, spec.key
        try:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_model_meta_val_str(model, f"{spec.arch}.expert_count".encode(), buf, 64)
            got = {
                "n_layer": llama_cpp.llama_model_n_layer(model), "n_head": llama_cpp.llama_model_n_head(model),
                "n_head_kv": llama_cpp.llama_model_n_head_kv(model), "n_embd": llama_cpp.llama_model_n_embd(model),
                "n_vocab": llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)),
                "n_expert": int(buf.value) if n > 0 else 0, "n_swa": llama_cpp.llama_model_n_swa(model),
            }
        finally:
            llama_cpp.llama_model_free(model)
        assert got == {"n_layer": spec.n_layers, "n_head": spec.n_head, "n_head_kv": spec.n_head_kv,
                       "n_embd": spec.n_embd, "n_vocab": spec.n_vocab, "n_expert": spec.n_expert,
                       "n_swa": spec.sliding_window}, spec.key


@pytest.mark.model
def test_zoo_models_run_in_the_engine_and_memory_matches(loaded_zoo: list[tuple[ZooSpec, Path]]) -> None:
    """Through the engine: each loads and decodes, and llama.cpp's buffers (weights, repacked copy, KV,
    compute, output) equal the memory estimate within 2 %, the KV cache exactly, for f16 and q8_0 caches."""
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    with EngineClient() as engine:
        for spec, path in loaded_zoo:
            info = inspect_gguf(path)
            # weights read into memory (the default: a repacked tensor only in the REPACK buffer) and mapped
            for kv, mmap in (("f16", False), ("q8_0", False), ("f16", True)):
                loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=1024, n_threads=2, type_k=kv,
                                                  type_v=kv, warmup=False, use_mmap=mmap))
                assert loaded.n_vocab == spec.n_vocab and loaded.architecture == spec.arch
                assert loaded.n_params == info.n_params
                assert any(k.startswith("model:CPU_Mapped") for k in loaded.buffers_mib) == mmap
                est = estimate_memory(info, MemoryConfig(n_ctx=1024, type_k=kv, type_v=kv, use_mmap=mmap),
                                      has_gpu=False)
                reported = sum(loaded.buffers_mib.values()) * MiB
                assert est.cpu.total == pytest.approx(reported, rel=0.02), (spec.key, kv, loaded.buffers_mib)
                kv_reported = sum(v for k, v in loaded.buffers_mib.items() if k.startswith("KV:")) * MiB
                assert est.kv_bytes == pytest.approx(kv_reported, abs=0.01 * MiB), spec.key
            res = engine.bench(P.Bench(request_id="z", n_gen=2, repetitions=1, warmup=False))
            assert len(res.samples_ns) == 1 and res.samples_ns[0] > 0


def test_random_weights_look_like_a_real_models(tmp_path: Path) -> None:
    """A zero MoE router sends every token to the same experts, and a zero MXFP4 block has a subnormal scale
    (2^-127): both run at another speed than a real model, so the filled file has neither."""
    import gguf
    import numpy as np

    from app.core.bench.zoo import fill_weights

    spec = dataclasses.replace(ZOO["gpt-oss-20b"], key="gpt-oss-1l", n_layers=1, n_vocab=512)
    path = fill_weights(write_zoo_model(spec, "MXFP4", tmp_path))
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    router = np.asarray(tensors["blk.0.ffn_gate_inp.weight"].data, np.float32).reshape(spec.n_expert, -1)
    assert len({row.tobytes() for row in router}) == spec.n_expert  # every expert its own row
    experts = tensors["blk.0.ffn_up_exps.weight"]
    assert experts.tensor_type == gguf.GGMLQuantizationType.MXFP4
    blocks = np.asarray(experts.data, np.uint8).reshape(-1, 17)  # one E8M0 scale byte, 16 bytes of codes
    assert (blocks[:, 0] == 118).all() and blocks[:, 1:].any()
    assert np.asarray(tensors["blk.0.attn_norm.weight"].data, np.float32).min() == 1.0  # norms of one
