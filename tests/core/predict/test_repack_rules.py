"""The CPU_REPACK rules per instruction set (ggml-cpu's repack.cpp), and what they do to the memory estimate:
MXFP4 experts repacked on x86 with AVX2 and on ARM with dot products, a tied output matrix's own repacked copy,
the mapped and read-in layouts of a file whose experts are repacked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from app.core.gguf.info import inspect_gguf
from app.core.predict.memory import MemoryConfig, estimate_memory
from app.core.predict.repack import X86_AVX2, repacked, repacked_types

AVX512 = X86_AVX2 | {"AVX512F"}
OLD_X86 = frozenset({"F16C"})  # SSE/AVX only: no repacked kernels
ARM_DOT = frozenset({"NEON", "DOTPROD"})
ARM_I8MM = frozenset({"NEON", "I8MM"})
ARM_PLAIN = frozenset({"NEON"})


def test_the_types_each_cpu_repacks() -> None:
    assert repacked_types(X86_AVX2) == {"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"}
    assert repacked_types(AVX512) == {"Q4_0", "Q4_K", "IQ4_NL", "MXFP4", "Q2_K"}
    assert repacked_types(OLD_X86) == set()
    assert repacked_types(ARM_DOT) == {"Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0", "Q1_0"}
    assert repacked_types(ARM_I8MM) == {"Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q1_0"}  # IQ4_NL, MXFP4: dotprod
    assert repacked_types(ARM_PLAIN) == set()
    for cpu in (X86_AVX2, ARM_DOT):
        assert not {"F16", "F32", "Q5_0", "Q3_K"} & repacked_types(cpu)


def test_row_multiples() -> None:
    # x86 interleaves 8 rows, ARM's 4x4 kernels 4 (its K-quants 8)
    assert repacked("Q4_0", 4096, X86_AVX2) and not repacked("Q4_0", 4100, X86_AVX2)
    assert repacked("Q4_0", 4100, ARM_DOT) and not repacked("Q4_0", 4102, ARM_DOT)
    assert repacked("MXFP4", 2884, ARM_DOT) and not repacked("MXFP4", 2884, X86_AVX2)
    assert not repacked("Q6_K", 4100, ARM_DOT) and repacked("Q6_K", 4104, ARM_DOT)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("repack")
    oss = dataclasses.replace(ZOO["gpt-oss-20b"], key="oss-2l", n_layers=2)
    gemma = dataclasses.replace(ZOO["gemma-3-4b"], key="g3-6l", n_layers=6)
    return {"oss": write_zoo_model(oss, "MXFP4", d),
            "gemma_q4_0": write_zoo_model(gemma, "Q4_K_M", d / "g-q4_0.gguf", uniform="Q4_0"),
            "gemma": write_zoo_model(gemma, "Q4_K_M", d / "g.gguf")}


def test_mxfp4_experts_are_repacked_where_the_cpu_has_kernels(files: dict[str, Path]) -> None:
    info = inspect_gguf(files["oss"])
    experts = sum(t.n_bytes for t in info.tensors if t.ggml_type == "MXFP4")
    assert experts > 0.3 * info.tensor_bytes  # two layers: the 201k-token embedding and output weigh more
    # the other matrices are Q8_0: repacked on ARM too (not the embedding: a row lookup)
    q8 = sum(t.n_bytes for t in info.tensors if t.ggml_type == "Q8_0" and t.name != "token_embd.weight")
    assert q8 > 0
    for cpu, expect in ((X86_AVX2, experts), (ARM_DOT, experts + q8), (OLD_X86, 0), (ARM_I8MM, q8)):
        est = estimate_memory(info, MemoryConfig(n_ctx=4096, cpu_features=cpu), has_gpu=False)
        assert est.cpu.repack == expect, sorted(cpu)
        # read in, each tensor is held once: in the plain buffer or in the repacked one
        assert est.cpu.weights + est.cpu.repack == info.tensor_bytes
        mapped = estimate_memory(info, MemoryConfig(n_ctx=4096, cpu_features=cpu, use_mmap=True), has_gpu=False)
        # mapped, the file stays mapped around the repacked experts: the repacked copy comes on top
        assert mapped.cpu.repack == expect
        assert mapped.cpu.weights > info.tensor_bytes - experts
    # a GPU's pinned host buffer comes before the repacking buffer
    gpu = estimate_memory(info, MemoryConfig(n_ctx=4096, cpu_features=X86_AVX2, gpu_present=True))
    assert gpu.cpu.repack == 0


def test_a_tied_output_in_a_repacked_type_gets_its_own_copy(files: dict[str, Path]) -> None:
    info = inspect_gguf(files["gemma_q4_0"])
    embd = next(t for t in info.tensors if t.name == "token_embd.weight")
    assert info.tied_output and embd.ggml_type == "Q4_0"
    layers = sum(t.n_bytes for t in info.tensors if t.name.startswith("blk.") and t.ggml_type == "Q4_0")
    for mmap in (False, True):
        est = estimate_memory(info, MemoryConfig(n_ctx=4096, cpu_features=X86_AVX2, use_mmap=mmap), has_gpu=False)
        assert est.cpu.repack == layers + embd.n_bytes  # the layers' matrices and the output's copy
        assert est.cpu.weights >= embd.n_bytes  # the lookup keeps the embedding as it is
    # Q6_K (the usual tied embedding) has repacked kernels on ARM only
    q6 = inspect_gguf(files["gemma"])
    q6_embd = next(t for t in q6.tensors if t.name == "token_embd.weight")
    assert q6_embd.ggml_type == "Q6_K"
    x86 = estimate_memory(q6, MemoryConfig(n_ctx=4096, cpu_features=X86_AVX2), has_gpu=False)
    arm = estimate_memory(q6, MemoryConfig(n_ctx=4096, cpu_features=ARM_DOT), has_gpu=False)
    assert arm.cpu.repack - x86.cpu.repack >= q6_embd.n_bytes
    # offloaded, the output's copy is on the GPU and nothing is repacked
    off = estimate_memory(info, MemoryConfig(n_ctx=4096, cpu_features=X86_AVX2, n_gpu_layers=-1))
    assert off.cpu.repack == 0 and off.gpu.weights >= embd.n_bytes
