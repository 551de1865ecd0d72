"""A model zoo without downloads: sparse GGUF files with the real shapes of popular models.

`write_zoo_model(spec, quant, path)` writes the header, metadata and tensor table of a real model
(app.core.bench.zoo_specs: Qwen2.5-0.5B ... Llama-3.1-8B, OLMoE, and the 2025-26 generation: gpt-oss-20b,
Qwen3, Gemma 3, the LFM2 and Granite 4 hybrids) in a llama.cpp-style quantization mix, and
leaves the tensor data as a hole by extending the file with truncate(): an 8B file takes a few MB of
disk. llama.cpp's compute and memory traffic do not depend on the weights' values (zeros stay finite:
RMS norm of a zero vector is zero), so such a model's outputs are meaningless while its speed and
memory are real. The tokenizer is a small SentencePiece-style byte vocabulary padded to the model's
real vocabulary size with unused tokens, so the embedding and output matrices keep their true shape.

Quantization mixes follow llama.cpp's `llama_tensor_get_type` closely enough for bytes and kernels:
the output matrix (or a tied embedding) is Q6_K in every 4-bit mix; Q4_K_M keeps attn_v and ffn_down
at Q6_K in the first and last eighth of the layers and every third one between; k-quant rows that are
not a multiple of 256 fall back to Q5_0 / Q8_0 as llama.cpp does (Qwen2.5-0.5B's 896-wide rows);
MoE router weights stay F32, and so do vectors, convolution kernels, Mamba's A and D and attention sinks; the
MXFP4 mix (gpt-oss's release) keeps the experts in MXFP4 and every other matrix in Q8_0. In a hybrid the Q4_K_M
rule for attn_v counts all layers where llama.cpp counts the attention layers only: a few attn_v matrices differ
in type from a real release's (megabytes), the shapes do not.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import replace
from pathlib import Path

import gguf

from app.core.bench.zoo_specs import ZOO, ZooSpec
from app.core.gguf.writing import add_byte_tokenizer, add_hparams, add_sparse_tensor, finish_sparse

__all__ = ["QUANTS", "ZOO", "ZooSpec", "kernel_probe", "quants_for", "tensor_table", "tensor_type", "write_zoo_model",
           "zoo_path", "fill_weights", "file_name"]

QUANTS = ("Q4_K_M", "Q4_0", "Q6_K", "Q8_0", "F16", "MXFP4")
_FILE_TYPE = {
    "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M, "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "F16": gguf.LlamaFileType.MOSTLY_F16, "MXFP4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE,
}
# MXFP4 (gpt-oss's release): the experts in MXFP4 as trained, every other matrix Q8_0
_BASE_TYPE = {"Q4_K_M": "Q4_K", "Q4_0": "Q4_0", "Q6_K": "Q6_K", "Q8_0": "Q8_0", "F16": "F16", "MXFP4": "Q8_0"}
# kept in float32 by llama.cpp's quantizer whatever the mix: vectors, convolution kernels, Mamba's A and D, sinks
_F32 = re.compile(r"(_norm\.weight|\.bias|ffn_gate_inp\.weight|attn_sinks\.weight|ssm_conv1d\.weight|"
                  r"shortconv\.conv\.weight|\.ssm_[ad])$")
_EXPERTS = re.compile(r"\.ffn_(gate|up|down)_exps\.weight$")
# llama.cpp's fallback when a row is not a multiple of a k-quant's 256-element super-block
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
N_SPECIAL_AND_BYTES = 260  # <unk> <s> </s>, 256 byte tokens, '▁'


def kernel_probe(layers: int = 4) -> ZooSpec:
    """Llama-3.2-1B's width (2048, the common width of 1-3B models' matrices) with only `layers` layers and a
    32k vocabulary: a prompt batch or a few tokens through it time one quantization's kernels in about a
    second (calibration)."""
    return replace(ZOO["llama-3.2-1b"], key=f"llama-3.2-1b-{layers}l", name=f"Llama-3.2-1B ({layers} layers)",
                   n_layers=layers, n_vocab=32768)


# Where each block keeps its float16 scale(s): (start, end) bytes within the block
_SCALE_BYTES = {"Q4_0": (0, 2), "Q5_0": (0, 2), "Q8_0": (0, 2), "Q4_1": (0, 4), "Q5_1": (0, 4),
                "Q2_K": (-4, None), "Q3_K": (-2, None), "Q4_K": (0, 4), "Q5_K": (0, 4), "Q6_K": (-2, None)}


def fill_weights(path: str | Path, seed: int = 0) -> Path:
    """Give a zoo file random weights in place of its zeros: random quants with a small scale in every block
    (float16; MXFP4's power-of-two byte), random float16 matrices and MoE routers, norms of one. Zeros run
    some types at another speed than real weights do (Q8_0 decodes 1.13-1.29x faster on the development VMs,
    MXFP4 1.5x slower: its zero scale is subnormal; a zero router sends every token to the same experts;
    memory and shapes are the same), so where a type's kernels are timed for real models the file gets
    weights like theirs. Writes the whole file (no longer sparse)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    reader = gguf.GGUFReader(path)
    tensors = [(t.tensor_type, int(t.data_offset), int(t.n_bytes), t.name) for t in reader.tensors]
    del reader  # its memory map, before the file is written through another handle
    scale = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
    with open(path, "r+b") as f:
        for qtype, offset, n_bytes, name in tensors:
            if qtype == gguf.GGMLQuantizationType.F32 and name.endswith("ffn_gate_inp.weight"):
                # a MoE router of random rows: each token picks its own experts, as in a real model (equal
                # rows would send every token to the same few experts, which a prompt batch runs as one
                # big product instead of many small ones)
                data = (rng.standard_normal(n_bytes // 4, np.float32) * 0.02).tobytes()
            elif qtype == gguf.GGMLQuantizationType.F32:
                data = np.ones(n_bytes // 4, np.float32).tobytes()
            elif qtype in (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16):
                values = rng.standard_normal(n_bytes // 2, np.float32) * 0.02
                half = values.astype(np.float16) if qtype == gguf.GGMLQuantizationType.F16 else \
                    (values.view(np.uint32) >> 16).astype(np.uint16)  # bf16: a float32's upper half
                data = half.tobytes()
            else:
                block = gguf.GGML_QUANT_SIZES[qtype][1]
                blocks = rng.integers(0, 256, (n_bytes // block, block), np.uint8)
                if qtype.name == "MXFP4":  # one E8M0 byte, a power of two: 2^(118 - 127) ≈ 0.002
                    blocks[:, 0] = 118
                else:
                    lo, hi = _SCALE_BYTES.get(qtype.name, (0, 2))
                    blocks[:, lo:hi] = np.resize(scale, (hi or block) - (lo % block))
                data = blocks.tobytes()
            f.seek(offset)
            f.write(data)
    return Path(path)


def quants_for(spec: ZooSpec) -> tuple[str, ...]:
    """The quantizations the zoo offers for a model (F16 only for the small ones, MXFP4 only for MoE)."""
    return tuple(q for q in QUANTS if (q != "F16" or spec.small) and (q != "MXFP4" or spec.n_expert))


def _use_more_bits(il: int, n: int) -> bool:
    # llama.cpp: the first and last eighth of the layers, and every third layer between, get more bits
    return il < n // 8 or il >= 7 * n // 8 or (il - n // 8) % 3 == 2


def tensor_type(quant: str, name: str, row: int, n_layers: int, tied: bool) -> str:
    """The ggml type llama.cpp's quantizer would give tensor `name` (row length `row`) in a `quant` file."""
    if _F32.search(name):
        return "F32"
    base = _BASE_TYPE[quant]
    is_output = name == "output.weight" or (tied and name == "token_embd.weight")
    qtype = base
    if quant == "MXFP4" and _EXPERTS.search(name):
        qtype = "MXFP4"
    elif quant in ("Q4_K_M", "Q4_0") and is_output:
        qtype = "Q6_K"
    elif quant == "Q4_K_M" and (".attn_v." in name or ".ffn_down" in name):
        il = int(name.split(".")[1])
        if _use_more_bits(il, n_layers):
            qtype = "Q6_K"
    block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]][0]
    if row % block:
        qtype = _FALLBACK.get(qtype, "F16")
    return qtype


def _tensors(spec: ZooSpec) -> list[tuple[str, list[int]]]:
    """(name, ggml shape: row length first) of every tensor, in llama.cpp's names and the order it creates them."""
    e, hd = spec.n_embd, spec.head_dim
    q, kv = spec.n_head * hd, spec.n_head_kv * hd
    out_norm = "token_embd_norm.weight" if spec.arch == "lfm2" else "output_norm.weight"  # LFM2's name for it
    out: list[tuple[str, list[int]]] = [("token_embd.weight", [e, spec.n_vocab]), (out_norm, [e])]
    if not spec.tied:
        out.append(("output.weight", [e, spec.n_vocab]))
    for il in range(spec.n_layers):
        b = f"blk.{il}."
        out.append((b + "attn_norm.weight", [e]))
        if spec.has_attention(il):
            out += _attention(spec, b, q, kv)
        elif spec.recurrent == "shortconv":
            out += [(b + "shortconv.conv.weight", [spec.conv_kernel, e]),
                    (b + "shortconv.in_proj.weight", [e, 3 * e]), (b + "shortconv.out_proj.weight", [e, e])]
        else:  # Mamba-2
            d_in, g_s, heads = spec.ssm_inner, spec.ssm_groups * spec.ssm_state, spec.ssm_heads
            out += [(b + "ssm_in.weight", [e, 2 * d_in + 2 * g_s + heads]),
                    (b + "ssm_conv1d.weight", [spec.conv_kernel, d_in + 2 * g_s]),
                    (b + "ssm_conv1d.bias", [d_in + 2 * g_s]), (b + "ssm_dt.bias", [heads]),
                    (b + "ssm_a", [1, heads]), (b + "ssm_d", [1, heads]),
                    (b + "ssm_norm.weight", [d_in // spec.ssm_groups, spec.ssm_groups]),
                    (b + "ssm_out.weight", [d_in, e])]
        if spec.arch == "gemma2":
            out += [(b + "post_attention_norm.weight", [e]), (b + "post_ffw_norm.weight", [e])]
        if spec.arch != "gpt-oss":  # gpt-oss normalises the FFN's input with its post-attention norm
            out.append((b + "ffn_norm.weight", [e]))
        if spec.n_expert:
            x, f = spec.n_expert, spec.n_ff
            out += [(b + "ffn_gate_inp.weight", [e, x]), (b + "ffn_gate_exps.weight", [e, f, x]),
                    (b + "ffn_down_exps.weight", [f, e, x]), (b + "ffn_up_exps.weight", [e, f, x])]
            if spec.sinks:
                out += [(b + "ffn_gate_inp.bias", [x]), (b + "ffn_gate_exps.bias", [f, x]),
                        (b + "ffn_down_exps.bias", [e, x]), (b + "ffn_up_exps.bias", [f, x])]
        else:
            out += [(b + "ffn_gate.weight", [e, spec.n_ff]), (b + "ffn_down.weight", [spec.n_ff, e]),
                    (b + "ffn_up.weight", [e, spec.n_ff])]
        if spec.arch == "gemma3":
            out.append((b + "post_ffw_norm.weight", [e]))
    return out


def _attention(spec: ZooSpec, b: str, q: int, kv: int) -> list[tuple[str, list[int]]]:
    e, hd = spec.n_embd, spec.head_dim
    out = [(b + "attn_q.weight", [e, q]), (b + "attn_k.weight", [e, kv]), (b + "attn_v.weight", [e, kv]),
           (b + "attn_output.weight", [q, e])]
    if spec.qkv_bias:
        out += [(b + "attn_q.bias", [q]), (b + "attn_k.bias", [kv]), (b + "attn_v.bias", [kv])]
    if spec.sinks:
        out += [(b + "attn_output.bias", [e]), (b + "attn_sinks.weight", [spec.n_head]),
                (b + "post_attention_norm.weight", [e])]
    if spec.qk_norm:  # one weight per head dimension, shared by the heads
        out += [(b + "attn_q_norm.weight", [hd]), (b + "attn_k_norm.weight", [hd])]
    if spec.arch == "olmoe":  # OLMoE normalises the whole q and k rows
        out += [(b + "attn_q_norm.weight", [e]), (b + "attn_k_norm.weight", [kv])]
    if spec.arch == "gemma3":
        out.append((b + "post_attention_norm.weight", [e]))
    return out


def tensor_table(spec: ZooSpec, quant: str) -> list[tuple[str, list[int], str, int, int]]:
    """(name, ggml shape, ggml type, elements, bytes) of every tensor of `spec` in a `quant` file: what a
    header would list, without writing one (Discover's offline estimates: app/core/models/curated.py)."""
    out = []
    for name, shape in _tensors(spec):
        qtype = tensor_type(quant, name, shape[0], spec.n_layers, spec.tied)
        block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]]
        n_el = math.prod(shape)
        out.append((name, shape, qtype, n_el, n_el // block * type_size))
    return out


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """Specials, the 256 byte tokens and '▁' (any text tokenizes), then unused padding tokens."""
    kind = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581"]
    types = [int(kind.UNKNOWN), int(kind.CONTROL), int(kind.CONTROL)] + [int(kind.BYTE)] * 256 + [int(kind.NORMAL)]
    pad = n_vocab - len(tokens)
    tokens += [f"<unused{i}>" for i in range(pad)]
    types += [int(kind.UNUSED)] * pad
    return tokens, [0.0] * n_vocab, types


def _metadata(w: gguf.GGUFWriter, spec: ZooSpec, quant: str) -> None:
    add_hparams(
        w, name=f"{spec.name} (zoo, sparse: meaningless output)", file_type=int(_FILE_TYPE[quant]),
        quantization_version=gguf.GGML_QUANT_VERSION, context_length=spec.n_ctx, embedding_length=spec.n_embd,
        block_count=spec.n_layers, feed_forward_length=spec.n_ff, head_count=spec.n_head,
        head_count_kv=spec.head_count_kv, key_length=spec.head_dim, value_length=spec.head_dim,
        rope_dimension_count=spec.head_dim, rope_freq_base=spec.rope_base, layer_norm_rms_eps=spec.rms_eps,
        vocab_size=spec.n_vocab)
    if spec.sliding_window:
        add_hparams(w, sliding_window=spec.sliding_window)
    if spec.arch == "gemma2":
        add_hparams(w, attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
    if spec.n_expert:
        add_hparams(w, expert_count=spec.n_expert, expert_used_count=spec.n_expert_used)
        if spec.arch != "olmoe":  # the others read the experts' width from their own key
            add_hparams(w, expert_feed_forward_length=spec.n_ff)
    if spec.recurrent == "shortconv":
        add_hparams(w, shortconv_l_cache=spec.conv_kernel)
    elif spec.recurrent == "mamba2":
        add_hparams(w, ssm_conv_kernel=spec.conv_kernel, ssm_inner_size=spec.ssm_inner, ssm_state_size=spec.ssm_state,
                    ssm_time_step_rank=spec.ssm_heads, ssm_group_count=spec.ssm_groups)
    add_byte_tokenizer(w, *_vocab(spec.n_vocab))


def file_name(spec: ZooSpec, quant: str) -> str:
    return f"zoo-{spec.key}-{quant}.gguf"


def write_zoo_model(spec: ZooSpec | str, quant: str, path: str | Path, uniform: str | None = None) -> Path:
    """Write a sparse GGUF of `spec` in `quant` at `path` (a directory: a file named after both). `uniform`:
    every matrix in that ggml type instead of `quant`'s mix (a kernel benchmark's file; the rows must be
    whole blocks of it)."""
    spec = ZOO[spec] if isinstance(spec, str) else spec
    if quant not in QUANTS:
        raise ValueError(f"unknown zoo quantization {quant!r}; use one of {', '.join(QUANTS)}")
    if quant == "MXFP4" and not spec.n_expert:
        raise ValueError(f"MXFP4 is a mixture-of-experts quantization; {spec.name} has no experts")
    path = Path(path)
    if path.is_dir():
        path = path / file_name(spec, quant)
    w = gguf.GGUFWriter(str(path), spec.arch)
    _metadata(w, spec, quant)
    for name, shape in _tensors(spec):
        qtype = tensor_type(quant, name, shape[0], spec.n_layers, spec.tied)
        qt = gguf.GGMLQuantizationType[uniform if uniform and len(shape) >= 2 else qtype]
        add_sparse_tensor(w, name, list(reversed(shape)), qt)  # the writer takes numpy order
    return finish_sparse(w, path)


def zoo_path(spec: ZooSpec | str, quant: str, directory: str | Path, random_weights: bool = False) -> Path:
    """The zoo file in `directory`, written if it is not there yet (a few hundred ms); with `random_weights`
    the one given random weights (`fill_weights`: ~1 s per GB written), kept apart in `directory`/filled."""
    spec = ZOO[spec] if isinstance(spec, str) else spec
    path = Path(directory) / ("filled" if random_weights else "") / file_name(spec, quant)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_zoo_model(spec, quant, tmp)
        if random_weights:
            fill_weights(tmp)
        os.replace(tmp, path)
    return path
