"""The GGUF writing pieces shared by the zoo and the test models (app.core.gguf.writing)."""

from __future__ import annotations

from pathlib import Path

import gguf

from app.core.gguf.info import inspect_gguf
from app.core.gguf.writing import add_byte_tokenizer, add_hparams, add_sparse_tensor, finish_sparse
from synth_gguf import byte_vocab


def test_sparse_file_has_the_right_sizes_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    add_hparams(w, block_count=1, embedding_length=256, head_count=4, context_length=512)
    add_byte_tokenizer(w, *byte_vocab(300))
    Q = gguf.GGMLQuantizationType  # noqa: N806 - gguf's enum, read like a constant
    add_sparse_tensor(w, "token_embd.weight", [300, 256], Q.Q4_K)
    add_sparse_tensor(w, "blk.0.attn_q.weight", [256, 256], Q.F16)
    add_sparse_tensor(w, "blk.0.attn_norm.weight", [256], Q.F32)
    finish_sparse(w, path)
    info = inspect_gguf(path)
    sizes = {t.name: (t.n_bytes, t.shape) for t in info.tensors}
    assert sizes == {"token_embd.weight": (300 * 256 // 256 * 144, [256, 300]),
                     "blk.0.attn_q.weight": (256 * 256 * 2, [256, 256]),
                     "blk.0.attn_norm.weight": (256 * 4, [256])}
    assert path.stat().st_size == info.data_offset + max(t.offset + t.n_bytes for t in info.tensors)
    assert (info.n_layers, info.n_embd, info.n_ctx_train, info.n_vocab) == (1, 256, 512, 300)
    assert info.metadata["tokenizer.ggml.bos_token_id"] == 1 and info.metadata["tokenizer.ggml.add_bos_token"]
