"""Recurrent layers' state (llama.cpp's RS buffer) from the header: which layers, how big per layer type and per
sequence, on which device; and `roofline info` naming the layer kinds. The sizes are worked out here from the
published configs' numbers (Granite 4.0-H-Micro: d_conv 4, d_inner 4096, 1 group of d_state 128; LFM2-1.2B:
L_cache 3 on a 2048 width), independently of the code's formulas."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from app.core.gguf.info import inspect_gguf
from app.core.predict.memory import MemoryConfig, MiB, estimate_memory
from app.core.predict.recurrent import layer_kinds, layer_summary, recurrent_layers, state_bytes

F32 = 4


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rs")
    keys = ("granite-4.0-h-micro", "lfm2-1.2b", "gemma-3-4b", "gpt-oss-20b", "qwen3-8b")
    return {k: write_zoo_model(dataclasses.replace(ZOO[k], n_layers=min(ZOO[k].n_layers, 16)), "Q4_K_M", d)
            for k in keys}


def test_mamba2_and_short_convolution_state_sizes(zoo: dict[str, Path]) -> None:
    granite = inspect_gguf(zoo["granite-4.0-h-micro"])  # 16 layers: attention at 5 and 15
    assert recurrent_layers(granite) == [il for il in range(16) if il not in (5, 15)]
    conv = (4 - 1) * (4096 + 2 * 1 * 128)  # the last d_conv - 1 inputs of x, B and C
    ssm = 128 * 4096  # d_state per inner channel
    assert state_bytes(granite) == 14 * (conv + ssm) * F32
    assert state_bytes(granite, n_seq=3) == 3 * state_bytes(granite)
    lfm2 = inspect_gguf(zoo["lfm2-1.2b"])
    assert recurrent_layers(lfm2) == [0, 1, 3, 4, 6, 7, 9, 11, 13, 15]
    assert state_bytes(lfm2) == 10 * 2048 * (3 - 1) * F32  # no SSM state, only the convolution's
    for key in ("gemma-3-4b", "gpt-oss-20b", "qwen3-8b"):
        assert state_bytes(inspect_gguf(zoo[key])) == 0 and recurrent_layers(inspect_gguf(zoo[key])) == []


def test_the_full_granite_state_is_the_measured_74_mib(tmp_path: Path) -> None:
    # llama.cpp's own log on a 3B Mamba-2 hybrid of this shape: "CPU RS buffer size = 73.79 MiB" (issue 29)
    info = inspect_gguf(write_zoo_model("granite-4.0-h-micro", "Q4_K_M", tmp_path))
    assert state_bytes(info) / MiB == pytest.approx(73.79, abs=0.01)
    assert layer_summary(info) == "4 attention + 36 Mamba-2 layers; recurrent state 74 MiB per sequence"


def test_the_estimate_holds_the_state_with_its_layers(zoo: dict[str, Path]) -> None:
    info = inspect_gguf(zoo["granite-4.0-h-micro"])
    one = estimate_memory(info, MemoryConfig(n_ctx=4096), has_gpu=False)
    two = estimate_memory(info, MemoryConfig(n_ctx=4096, n_seq=2), has_gpu=False)
    assert one.cpu.state == state_bytes(info) and two.cpu.state == 2 * one.cpu.state
    cpu = one.cpu
    assert one.total - cpu.compute - cpu.weights - cpu.repack - cpu.output - one.kv_bytes == cpu.state
    # only the 2 attention layers keep a KV cache, and the state does not grow with the context
    assert [len(c.layers) for c in one.caches] == [2]
    long = estimate_memory(info, MemoryConfig(n_ctx=32768), has_gpu=False)
    assert long.cpu.state == one.cpu.state and long.kv_bytes == 8 * one.kv_bytes
    # offloaded layers keep their state on the GPU (llama.cpp's offload_kqv default)
    half = estimate_memory(info, MemoryConfig(n_ctx=4096, n_gpu_layers=9))  # blocks 8..15 and the output
    per_layer = state_bytes(info) // len(recurrent_layers(info))
    assert half.gpu.state == 7 * per_layer and half.cpu.state == 7 * per_layer  # 15 is attention, 5 too


def test_layer_kinds_name_every_layer(zoo: dict[str, Path]) -> None:
    assert layer_kinds(inspect_gguf(zoo["lfm2-1.2b"])) == [(6, "attention"), (10, "short-convolution")]
    gemma = inspect_gguf(zoo["gemma-3-4b"])  # every sixth layer full attention
    assert layer_kinds(gemma) == [(2, "attention"), (14, "sliding-window attention")]
    assert layer_summary(gemma) == "2 attention + 14 sliding-window attention layers"
    assert layer_summary(inspect_gguf(zoo["qwen3-8b"])) == ""  # nothing to say beyond the layer count


def test_info_names_the_layer_kinds(zoo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["info", "-m", str(zoo["granite-4.0-h-micro"])]) == 0
    out = capsys.readouterr().out
    assert "16: 2 attention + 14 Mamba-2 layers; recurrent state 29 MiB per sequence" in out
    assert "8 (in the attention layers; 14 recurrent layers keep none)" in out
    assert main(["info", "-m", str(zoo["granite-4.0-h-micro"]), "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["layer_kinds"] == [{"layers": 2, "kind": "attention"}, {"layers": 14, "kind": "Mamba-2"}]
    assert data["recurrent_state_bytes_per_sequence"] == 14 * (3 * (4096 + 256) + 128 * 4096) * F32


@pytest.mark.model
@pytest.mark.parametrize("key", ["granite-4.0-h-micro", "lfm2-1.2b"])
def test_llama_cpp_allocates_the_state_per_sequence(zoo: dict[str, Path], key: str) -> None:
    """llama.cpp's own "RS buffer size" line for 1 and 3 sequences (a context made with n_seq_max)."""
    import ctypes
    import re

    import llama_cpp

    lines: list[str] = []

    def on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        lines.append(text.decode("utf-8", errors="replace"))

    callback = llama_cpp.llama_log_callback(on_log)
    info = inspect_gguf(zoo[key])
    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(str(zoo[key]).encode(), llama_cpp.llama_model_default_params())
    assert model
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    try:
        for n_seq in (1, 3):
            lines.clear()
            params = llama_cpp.llama_context_default_params()
            params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = 3072, 512, 512, n_seq
            ctx = llama_cpp.llama_init_from_model(model, params)
            assert ctx
            llama_cpp.llama_free(ctx)
            found = re.findall(r"CPU RS buffer size =\s*([\d.]+) MiB", "".join(lines))
            assert len(found) == 1, "".join(lines)[-2000:]
            est = estimate_memory(info, MemoryConfig(n_ctx=3072, n_seq=n_seq), has_gpu=False)
            assert f"{est.cpu.state / MiB:.2f}" == found[0], (key, n_seq)
    finally:
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
        llama_cpp.llama_model_free(model)


def test_info_names_sinks_and_sliding_windows(zoo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["info", "-m", str(zoo["gpt-oss-20b"])]) == 0
    out = capsys.readouterr().out
    assert "16: 8 attention + 8 sliding-window attention layers" in out  # alternating, 16 of the 24 layers here
    assert "128 tokens on 8 of 16 layers (1:1 sliding:full); attention sinks" in out
    assert main(["info", "-m", str(zoo["qwen3-8b"])]) == 0
    assert "sinks" not in capsys.readouterr().out


def test_recommend_counts_the_state_beside_the_kv_cache(zoo: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    main(["recommend", "-m", str(zoo["granite-4.0-h-micro"]), "--ctx", "4096", "-t", "2"])
    out = capsys.readouterr().out
    assert "recurrent state 28.7 MiB" in out, out  # 14 Mamba-2 layers of the 16 kept here
    main(["recommend", "-m", str(zoo["qwen3-8b"]), "--ctx", "4096", "-t", "2"])
    assert "recurrent state" not in capsys.readouterr().out
