"""Header-only GGUF files for big models: real metadata and tensor table, data left as a sparse hole.

They let the hub server offer "Llama-3-8B in nine quantizations" (5-16 GB each) in a few kilobytes of disk,
which is all the picker needs: it only ever reads headers remotely. llama.cpp cannot run them.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from app.core.gguf.writing import add_hparams, add_sparse_tensor, finish_sparse

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
    add_hparams(w, name=name, file_type=int(ftype), context_length=n_ctx, embedding_length=n_embd,
                block_count=n_layers, feed_forward_length=n_ff, head_count=n_head, head_count_kv=n_head_kv,
                rope_dimension_count=n_embd // n_head, layer_norm_rms_eps=1e-5, vocab_size=n_vocab,
                chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")

    # llama.cpp's mixes keep sensitive tensors one step wider (output, attn_v, ffn_down): that is what makes
    # Q4_K_M bigger than Q4_0 although both store 4.5-bit blocks.
    wider = {"Q2_K": "Q3_K", "Q3_K": "Q4_K", "Q4_K": "Q6_K", "Q5_K": "Q6_K"}
    mixed = quant.endswith("_M") or quant == "Q2_K"

    def info(tname: str, rows: int, cols: int) -> None:
        qt = qtype
        if mixed and any(k in tname for k in ("output.weight", "attn_v", "ffn_down")) and qname in wider:
            qt = gguf.GGMLQuantizationType[wider[qname]]
        add_sparse_tensor(w, tname, [rows, cols], qt)

    def norm(tname: str, n: int) -> None:
        add_sparse_tensor(w, tname, [n], gguf.GGMLQuantizationType.F32)

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
    return finish_sparse(w, path)
