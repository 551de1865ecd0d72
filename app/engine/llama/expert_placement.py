"""Keeping a mixture-of-experts model's expert matrices in CPU memory while the rest is offloaded.

llama.cpp places tensors by `llama_model_params.tensor_buft_overrides`: a NULL-terminated array of (regex, buffer
type), searched against each tensor's name before the layer's own device is used. Its tools' `--n-cpu-moe N` adds
one entry per block 0..N-1, `blk\\.<i>\\.ffn_(up|down|gate|gate_up)_(ch|)exps`, on the CPU buffer type; this module
builds the same array. llama-cpp-python 0.3.36 declares the field as a bare pointer and never sets it, so the
array is made here with ctypes and must stay alive until the model is loaded (llama.cpp reads the patterns
during the load only): `ExpertOverrides` owns it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from app.engine.llama.backends import ggml_library

EXPERTS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"  # llama.cpp's LLM_FFN_EXPS_REGEX (common/common.h)
GGML_BACKEND_DEVICE_TYPE_CPU = 0


class _Override(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def expert_patterns(n_cpu_moe: int) -> list[str]:
    """One pattern per block whose experts stay on the CPU, as llama.cpp's --n-cpu-moe writes them."""
    return [rf"blk\.{il}{EXPERTS_REGEX}" for il in range(max(0, n_cpu_moe))]


def cpu_buffer_type() -> int:
    """ggml's CPU buffer type (the plain one: not the repacking "CPU_REPACK" extra buffer)."""
    lib = ggml_library()
    lib.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    lib.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    lib.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
    dev = lib.ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
    if not dev:
        raise RuntimeError("llama.cpp has no CPU device registered")
    return int(lib.ggml_backend_dev_buffer_type(dev))


@dataclass
class ExpertOverrides:
    """The override array for `n_cpu_moe` blocks, kept alive as long as this object is."""

    n_cpu_moe: int
    _patterns: list[bytes] = field(default_factory=list, repr=False)
    _array: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._patterns = [p.encode() for p in expert_patterns(self.n_cpu_moe)]
        buft = cpu_buffer_type() if self._patterns else 0
        self._array = (_Override * (len(self._patterns) + 1))()
        for i, pattern in enumerate(self._patterns):
            self._array[i].pattern = pattern
            self._array[i].buft = buft
        # the last entry stays {NULL, NULL}: llama.cpp stops at a NULL pattern

    @property
    def address(self) -> int | None:
        """For `llama_model_params.tensor_buft_overrides`; None (leave it NULL) when nothing is overridden."""
        return ctypes.addressof(self._array) if self._patterns else None
