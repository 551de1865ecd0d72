"""Header-only GGUF files for big models: real metadata and tensor table, data left as a sparse hole.

They let the hub server offer "Llama-3-8B in nine quantizations" (5-16 GB each) in a few kilobytes of disk,
which is all the picker needs: it only ever reads headers remotely. llama.cpp cannot run them.
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

# file type name -> (ggml type of most weights, llama file type)
QUANTS = {
    "Q2_K": ("Q2_K", gguf.LlamaFileType.MOSTLY_Q2_K),
    "Q3_K_M": ("Q3_K", gguf.LlamaFileType.MOSTLY_Q3_K_M),
    "Q4_0": ("Q4_0", gguf.LlamaFileType.MOSTLY_Q4_0),
    "Q4_K_M": ("Q4_K", gguf.LlamaFileType.MOSTLY_Q4_K_M),
    "Q5_K_M": ("Q5_K", gguf.LlamaFileType.MOSTLY_Q5_K_M),
    "Q6_K": ("Q6_K", gguf.LlamaFileType.MOSTLY_Q6_K),
    "Q8_0": ("Q8_0", gguf.LlamaFileType.MOSTLY_Q8_0),
    "F16": ("F16", gguf.LlamaFileType.MOSTLY_F16),
}


def write_header_only(path: str | Path, quant: str, *, n_layers: int = 32, n_embd: int = 4096, n_ff: int = 14336,
                      n_head: int = 32, n_head_kv: int = 8, n_vocab: int = 128256, n_ctx: int = 131072,
                      name: str = "Llama 3.1 8B Instruct") -> Path:
    """A llama-architecture GGUF whose tensor data is a sparse hole of the right size."""
    qname, ftype = QUANTS[quant]
    qtype = gguf.GGMLQuantizationType[qname]
    path = Path(path)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_file_type(int(ftype))
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")

    # llama.cpp's mixes keep sensitive tensors one step wider (output, attn_v, ffn_down): that is what makes
    # Q4_K_M bigger than Q4_0 although both store 4.5-bit blocks.
    wider = {"Q2_K": "Q3_K", "Q3_K": "Q4_K", "Q4_K": "Q6_K", "Q5_K": "Q6_K"}
    mixed = quant.endswith("_M") or quant == "Q2_K"

    def info(tname: str, rows: int, cols: int) -> None:
        qt = qtype
        if mixed and any(k in tname for k in ("output.weight", "attn_v", "ffn_down")) and qname in wider:
            qt = gguf.GGMLQuantizationType[wider[qname]]
        block, type_size = gguf.GGML_QUANT_SIZES[qt]
        nbytes = rows * cols // block * type_size
        if qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor_info(tname, [rows, cols], np.dtype(np.float16), nbytes)
        else:  # quantized: the writer takes the byte shape and converts it back
            w.add_tensor_info(tname, [rows, cols // block * type_size], np.dtype(np.uint8), nbytes, raw_dtype=qt)

    def norm(tname: str, n: int) -> None:
        w.add_tensor_info(tname, [n], np.dtype(np.float32), n * 4)

    head = n_embd // n_head
    info("token_embd.weight", n_vocab, n_embd)
    norm("output_norm.weight", n_embd)
    info("output.weight", n_vocab, n_embd)
    for il in range(n_layers):
        b = f"blk.{il}."
        norm(b + "attn_norm.weight", n_embd)
        info(b + "attn_q.weight", n_embd, n_embd)
        info(b + "attn_k.weight", head * n_head_kv, n_embd)
        info(b + "attn_v.weight", head * n_head_kv, n_embd)
        info(b + "attn_output.weight", n_embd, n_embd)
        norm(b + "ffn_norm.weight", n_embd)
        info(b + "ffn_gate.weight", n_ff, n_embd)
        info(b + "ffn_up.weight", n_ff, n_embd)
        info(b + "ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    from app.core.gguf_info import parse_header

    raw = parse_header(path.read_bytes())
    end = max(t.offset + t.n_bytes for t in raw.tensors)
    os.truncate(path, raw.data_offset + end)  # sparse: no disk used
    return path
