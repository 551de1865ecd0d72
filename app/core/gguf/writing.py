"""Writing GGUF files with gguf.GGUFWriter: the pieces the model zoo and the test models share.

* `add_hparams(w, block_count=2, ...)` calls the writer's typed setter for each name (`w.add_block_count(2)`).
* `add_byte_tokenizer` writes a SentencePiece-style ("llama") vocabulary with <unk>=0, <s>=1, </s>=2.
* `add_sparse_tensor` + `finish_sparse` write a header whose tensor data is a hole of the right size: no disk
  used, reads as zeros, enough for everything that only reads headers (estimators, the picker).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gguf
import numpy as np


def add_hparams(w: gguf.GGUFWriter, **values: Any) -> None:
    """`w.add_<name>(value)` for every name given, in order."""
    for name, value in values.items():
        getattr(w, f"add_{name}")(value)


def add_byte_tokenizer(w: gguf.GGUFWriter, tokens: list[str], scores: list[float], types: list[int],
                       pre: str | None = None) -> None:
    """A "llama" (SentencePiece) tokenizer: the token table, <unk> 0, <s> 1 (added), </s> 2 (not added)."""
    add_hparams(w, tokenizer_model="llama")
    if pre is not None:
        add_hparams(w, tokenizer_pre=pre)
    add_hparams(w, token_list=tokens, token_scores=scores, token_types=types, unk_token_id=0, bos_token_id=1,
                eos_token_id=2, add_bos_token=True, add_eos_token=False)


def add_sparse_tensor(w: gguf.GGUFWriter, name: str, np_shape: list[int], qt: gguf.GGMLQuantizationType) -> None:
    """The tensor-table entry of a `qt` tensor of numpy shape `np_shape` (ggml's shape reversed), no data."""
    block, type_size = gguf.GGML_QUANT_SIZES[qt]
    nbytes = int(np.prod(np_shape)) // block * type_size
    if qt == gguf.GGMLQuantizationType.F32:
        w.add_tensor_info(name, np_shape, np.dtype(np.float32), nbytes)
    elif qt == gguf.GGMLQuantizationType.F16:
        w.add_tensor_info(name, np_shape, np.dtype(np.float16), nbytes)
    else:  # quantized: the writer takes the byte shape and converts it back
        byte_shape = [*np_shape[:-1], np_shape[-1] // block * type_size]
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qt)


def finish_sparse(w: gguf.GGUFWriter, path: Path) -> Path:
    """Write the header and tensor table, then extend the file to its full size as a hole."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    from app.core.gguf.info import parse_header

    with open(path, "rb") as f:
        raw = parse_header(f.read())
    end = max(t.offset + t.n_bytes for t in raw.tensors)
    os.truncate(path, raw.data_offset + end)  # a hole: no disk used, reads as zeros
    return path
