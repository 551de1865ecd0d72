"""The tensor-override array for --n-cpu-moe, built with ctypes as llama.cpp's tools build it, and a load with it
(on the CPU backend every tensor is on the CPU anyway: what this shows is that llama.cpp accepts the array and
names the override in its log; where the experts go on a real device: tests/core/predict/test_memory_on_gpu.py)."""

from __future__ import annotations

import ctypes
import re
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from app.engine.llama.expert_placement import ExpertOverrides, _Override, cpu_buffer_type, expert_patterns


def test_one_pattern_per_block_matching_only_that_blocks_experts() -> None:
    patterns = expert_patterns(3)
    assert len(patterns) == 3
    for il, pattern in enumerate(patterns):
        for name in ("ffn_up_exps", "ffn_down_exps", "ffn_gate_exps", "ffn_gate_up_exps", "ffn_up_chexps"):
            assert re.search(pattern, f"blk.{il}.{name}.weight")
        assert not re.search(pattern, f"blk.{il}.ffn_up.weight")  # a dense FFN stays where its layer goes
        assert not re.search(pattern, f"blk.{il}.ffn_gate_inp.weight")  # the router too
        assert not re.search(pattern, f"blk.{il + 10}.ffn_up_exps.weight")  # blk.1 is not blk.11
    assert expert_patterns(0) == []


def test_the_array_ends_with_a_null_entry_and_names_the_cpu_buffer_type() -> None:
    overrides = ExpertOverrides(2)
    assert overrides.address is not None
    array = (_Override * 3).from_address(overrides.address)
    assert [array[i].pattern for i in range(2)] == [p.encode() for p in expert_patterns(2)]
    assert array[0].buft == array[1].buft == cpu_buffer_type() != 0
    assert array[2].pattern is None and not array[2].buft
    assert ExpertOverrides(0).address is None  # nothing overridden: the field stays NULL


def test_a_load_with_experts_kept_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    from app.engine import protocol as P
    from app.engine.llama.worker import load

    monkeypatch.setattr(load, "send", lambda event: None)  # progress events: no parent to read them here
    spec = replace(ZOO["olmoe-1b-7b"], key="olmoe-2l", n_layers=2)
    path = write_zoo_model(spec, "Q4_0", tmp_path / "olmoe-2l.gguf")
    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        lines.append(text.decode(errors="replace"))

    class Quiet:
        _load_cancelled = False
        _flash_used = False

        def poll_interrupt(self, _: str) -> bool:
            return False

    llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))
    try:
        llm = load.construct(Quiet(), P.LoadConfig(model_path=str(path), n_ctx=256, n_cpu_moe=2,  # type: ignore[arg-type]
                                              n_gpu_layers=-1, warmup=False))
        llm.close()
    finally:
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
    text = "".join(lines)
    assert "blk.0.ffn_up_exps.weight" in text and "buffer type overridden to CPU" in text
