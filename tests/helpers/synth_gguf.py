"""Tiny synthetic GGUF models that llama.cpp really loads and runs (written with `gguf.GGUFWriter`).

`write_synthetic_gguf(path, ...)` writes a small random-weight model: llama architecture by default
(or a Gemma-3-style one with sliding-window layers), a SentencePiece-style vocabulary of byte-fallback
tokens (<unk>, <s>, </s>, the 256 bytes <0x00>..<0xFF>, "▁") so llama.cpp can tokenize any text, and
weights in F32 (default), F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1. The defaults (n_embd 256,
n_ff 512) keep rows a multiple of 256 so llama.cpp can re-quantize the file to k-quants; a 2-layer
F32 model is about 5 MB. Output is random text, which is all speed, memory and plumbing tests need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np

from app.core.gguf.writing import add_byte_tokenizer, add_hparams

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]
_FILE_TYPES = {
    "F32": gguf.LlamaFileType.ALL_F32,
    "F16": gguf.LlamaFileType.MOSTLY_F16,
    "BF16": gguf.LlamaFileType.MOSTLY_BF16,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
    "Q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
    "Q5_1": gguf.LlamaFileType.MOSTLY_Q5_1,
}


def byte_vocab(n_vocab: int = 260) -> tuple[list[str], list[float], list[int]]:
    """SPM vocabulary: specials, 256 byte tokens, then '▁' and filler pieces up to n_vocab."""
    if n_vocab < 260:
        raise ValueError("n_vocab must be at least 260 (3 specials + 256 bytes + '▁')")
    T = gguf.TokenType  # noqa: N806 - gguf's enum, read like a constant
    tokens = list(SPECIAL_TOKENS)
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [T.BYTE] * 256
    tokens.append("\u2581")
    types.append(T.NORMAL)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    i = 0
    while len(tokens) < n_vocab:  # filler pieces, all distinct: '▁e', '▁t', ..., then 'ee', 'et', ...
        word = ""
        k = i
        while True:
            k, r = divmod(k, len(letters))
            word += letters[r]
            if k == 0:
                break
            k -= 1
        tokens.append(("\u2581" + word) if i < len(letters) else word)
        types.append(T.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(k) for k in range(1, len(tokens) - 258)]
    return tokens, scores, [int(t) for t in types]


def write_synthetic_gguf(
    path: str | Path,
    *,
    arch: str = "llama",
    n_layers: int = 2,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 512,
    n_ctx: int = 2048,
    n_vocab: int = 260,
    tensor_type: str = "F32",
    tied_output: bool = False,
    sliding_window: int = 0,
    chat_template: str | None = None,
    name: str = "synthetic",
    file_type: int | None = None,
    seed: int = 0,
    extra_metadata: dict[str, Any] | None = None,
    split_max_tensors: int = 0,
) -> Path:
    """Write a loadable tiny model. arch: "llama" or "gemma3" (sliding window on 5 of every 6 layers).

    `tensor_type` is the type of the 2-D weights (norms stay F32). `file_type` overrides the
    general.file_type number written (to label a file as, say, Q4_K_M in estimator tests).
    `split_max_tensors` > 0 writes gguf-split parts (`<stem>-00001-of-0000N.gguf`) instead of `path`.
    """
    if arch not in ("llama", "gemma3"):
        raise ValueError(f"unsupported synthetic architecture {arch!r}")
    qtype = gguf.GGMLQuantizationType[tensor_type]
    if tensor_type not in _FILE_TYPES:
        raise ValueError(f"tensor_type must be one of {sorted(_FILE_TYPES)}")
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head, n_head by n_head_kv")
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)
    path = Path(path)
    w = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    add_hparams(
        w, name=name, file_type=int(file_type if file_type is not None else _FILE_TYPES[tensor_type]),
        quantization_version=gguf.GGML_QUANT_VERSION, context_length=n_ctx, embedding_length=n_embd,
        block_count=n_layers, feed_forward_length=n_ff, head_count=n_head, head_count_kv=n_head_kv,
        layer_norm_rms_eps=1e-6, rope_freq_base=10000.0)
    if arch == "llama":
        add_hparams(w, rope_dimension_count=head_dim, vocab_size=n_vocab)
    else:
        add_hparams(w, key_length=head_dim, value_length=head_dim, sliding_window=sliding_window or 64)
    add_byte_tokenizer(w, *byte_vocab(n_vocab), pre="default")
    if chat_template:
        w.add_chat_template(chat_template)
    for key, value in (extra_metadata or {}).items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_string(key, str(value))

    def weight(name: str, rows: int, cols: int) -> None:
        """A rows x cols matrix (numpy order; ggml shape [cols, rows]) in the requested type."""
        data = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    def norm(name: str, n: int) -> None:
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    weight("token_embd.weight", n_vocab, n_embd)
    norm("output_norm.weight", n_embd)
    if not tied_output:
        weight("output.weight", n_vocab, n_embd)
    kv = head_dim * n_head_kv
    for il in range(n_layers):
        b = f"blk.{il}."
        norm(b + "attn_norm.weight", n_embd)
        weight(b + "attn_q.weight", n_embd, n_embd)
        weight(b + "attn_k.weight", kv, n_embd)
        weight(b + "attn_v.weight", kv, n_embd)
        weight(b + "attn_output.weight", n_embd, n_embd)
        norm(b + "ffn_norm.weight", n_embd)
        weight(b + "ffn_gate.weight", n_ff, n_embd)
        weight(b + "ffn_up.weight", n_ff, n_embd)
        weight(b + "ffn_down.weight", n_embd, n_ff)
        if arch == "gemma3":
            norm(b + "attn_q_norm.weight", head_dim)
            norm(b + "attn_k_norm.weight", head_dim)
            norm(b + "post_attention_norm.weight", n_embd)
            norm(b + "post_ffw_norm.weight", n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
