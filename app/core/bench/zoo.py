"""A model zoo without downloads: sparse GGUF files with the real shapes of popular models.

`write_zoo_model(spec, quant, path)` writes the header, metadata and tensor table of a real model
(Qwen2.5-0.5B ... Llama-3.1-8B, an OLMoE mixture of experts) in a llama.cpp-style quantization mix, and
leaves the tensor data as a hole by extending the file with truncate(): an 8B file takes a few MB of
disk. llama.cpp's compute and memory traffic do not depend on the weights' values (zeros stay finite:
RMS norm of a zero vector is zero), so such a model's outputs are meaningless while its speed and
memory are real. The tokenizer is a small SentencePiece-style byte vocabulary padded to the model's
real vocabulary size with unused tokens, so the embedding and output matrices keep their true shape.

Quantization mixes follow llama.cpp's `llama_tensor_get_type` closely enough for bytes and kernels:
the output matrix (or a tied embedding) is Q6_K in every 4-bit mix; Q4_K_M keeps attn_v and ffn_down
at Q6_K in the first and last eighth of the layers and every third one between; k-quant rows that are
not a multiple of 256 fall back to Q5_0 / Q8_0 as llama.cpp does (Qwen2.5-0.5B's 896-wide rows);
MoE router weights stay F32.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import gguf

from app.core.gguf.writing import add_byte_tokenizer, add_hparams, add_sparse_tensor, finish_sparse

QUANTS = ("Q4_K_M", "Q4_0", "Q6_K", "Q8_0", "F16")
_FILE_TYPE = {
    "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M, "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "F16": gguf.LlamaFileType.MOSTLY_F16,
}
_BASE_TYPE = {"Q4_K_M": "Q4_K", "Q4_0": "Q4_0", "Q6_K": "Q6_K", "Q8_0": "Q8_0", "F16": "F16"}
# llama.cpp's fallback when a row is not a multiple of a k-quant's 256-element super-block
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
N_SPECIAL_AND_BYTES = 260  # <unk> <s> </s>, 256 byte tokens, '▁'


@dataclass(frozen=True)
class ZooSpec:
    """The shapes and metadata llama.cpp reads for one published model."""

    key: str  # short name used on the command line and in file names
    name: str
    arch: str  # "llama" | "qwen2" | "gemma2" | "olmoe"
    n_layers: int
    n_embd: int
    n_ff: int  # per expert for MoE
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    n_ctx: int
    tied: bool
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    sliding_window: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    qkv_bias: bool = False
    params_b: float = 0.0  # published parameter count (billions), for display

    @property
    def small(self) -> bool:
        """Small enough for F16 files and quick tests."""
        return self.params_b < 2.5


ZOO: dict[str, ZooSpec] = {s.key: s for s in (
    ZooSpec("qwen2.5-0.5b", "Qwen2.5-0.5B", "qwen2", 24, 896, 4864, 14, 2, 64, 151936, 32768, True,
            rope_base=1e6, rms_eps=1e-6, qkv_bias=True, params_b=0.49),
    ZooSpec("llama-3.2-1b", "Llama-3.2-1B", "llama", 16, 2048, 8192, 32, 8, 64, 128256, 131072, True,
            rope_base=5e5, params_b=1.24),
    ZooSpec("gemma-2-2b", "Gemma-2-2B", "gemma2", 26, 2304, 9216, 8, 4, 256, 256000, 8192, True,
            rms_eps=1e-6, sliding_window=4096, params_b=2.61),
    ZooSpec("llama-3.2-3b", "Llama-3.2-3B", "llama", 28, 3072, 8192, 24, 8, 128, 128256, 131072, True,
            rope_base=5e5, params_b=3.21),
    ZooSpec("qwen2.5-7b", "Qwen2.5-7B", "qwen2", 28, 3584, 18944, 28, 4, 128, 152064, 32768, False,
            rope_base=1e6, rms_eps=1e-6, qkv_bias=True, params_b=7.62),
    ZooSpec("mistral-7b", "Mistral-7B-v0.3", "llama", 32, 4096, 14336, 32, 8, 128, 32768, 32768, False,
            rope_base=1e6, params_b=7.25),
    ZooSpec("llama-3.1-8b", "Llama-3.1-8B", "llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072, False,
            rope_base=5e5, params_b=8.03),
    ZooSpec("olmoe-1b-7b", "OLMoE-1B-7B", "olmoe", 16, 2048, 1024, 16, 16, 128, 50304, 4096, False,
            n_expert=64, n_expert_used=8, params_b=6.92),
)}


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
    """Give a zoo file random weights in place of its zeros: random quants with a small float16 scale in
    every block, random float16 matrices, norms of one. Zeros decode some types faster than real weights do
    (Q8_0 1.13-1.29x on the development VMs; memory and shapes are the same), so where a type's kernels are
    timed for real models the file gets weights like theirs. Writes the whole file (no longer sparse)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    reader = gguf.GGUFReader(path)
    tensors = [(t.tensor_type, int(t.data_offset), int(t.n_bytes)) for t in reader.tensors]
    del reader  # its memory map, before the file is written through another handle
    scale = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
    with open(path, "r+b") as f:
        for qtype, offset, n_bytes in tensors:
            if qtype == gguf.GGMLQuantizationType.F32:
                data = np.ones(n_bytes // 4, np.float32).tobytes()
            elif qtype in (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16):
                values = rng.standard_normal(n_bytes // 2, np.float32) * 0.02
                half = values.astype(np.float16) if qtype == gguf.GGMLQuantizationType.F16 else \
                    (values.view(np.uint32) >> 16).astype(np.uint16)  # bf16: a float32's upper half
                data = half.tobytes()
            else:
                block = gguf.GGML_QUANT_SIZES[qtype][1]
                blocks = rng.integers(0, 256, (n_bytes // block, block), np.uint8)
                lo, hi = _SCALE_BYTES.get(qtype.name, (0, 2))
                blocks[:, lo:hi] = np.resize(scale, (hi or block) - (lo % block))
                data = blocks.tobytes()
            f.seek(offset)
            f.write(data)
    return Path(path)


def quants_for(spec: ZooSpec) -> tuple[str, ...]:
    """The quantizations the zoo offers for a model (F16 only for the small ones)."""
    return QUANTS if spec.small else tuple(q for q in QUANTS if q != "F16")


def _use_more_bits(il: int, n: int) -> bool:
    # llama.cpp: the first and last eighth of the layers, and every third layer between, get more bits
    return il < n // 8 or il >= 7 * n // 8 or (il - n // 8) % 3 == 2


def tensor_type(quant: str, name: str, row: int, n_layers: int, tied: bool) -> str:
    """The ggml type llama.cpp's quantizer would give tensor `name` (row length `row`) in a `quant` file."""
    if name.endswith(("_norm.weight", ".bias")) or "ffn_gate_inp" in name:
        return "F32"
    base = _BASE_TYPE[quant]
    is_output = name == "output.weight" or (tied and name == "token_embd.weight")
    qtype = base
    if quant in ("Q4_K_M", "Q4_0") and is_output:
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
    """(name, ggml shape: row length first) of every tensor, in llama.cpp's names."""
    e, hd = spec.n_embd, spec.head_dim
    q, kv = spec.n_head * hd, spec.n_head_kv * hd
    out: list[tuple[str, list[int]]] = [("token_embd.weight", [e, spec.n_vocab]), ("output_norm.weight", [e])]
    if not spec.tied:
        out.append(("output.weight", [e, spec.n_vocab]))
    for il in range(spec.n_layers):
        b = f"blk.{il}."
        out += [(b + "attn_norm.weight", [e]), (b + "attn_q.weight", [e, q]), (b + "attn_k.weight", [e, kv]),
                (b + "attn_v.weight", [e, kv]), (b + "attn_output.weight", [q, e])]
        if spec.qkv_bias:
            out += [(b + "attn_q.bias", [q]), (b + "attn_k.bias", [kv]), (b + "attn_v.bias", [kv])]
        if spec.arch == "olmoe":  # OLMoE normalises the whole q and k rows
            out += [(b + "attn_q_norm.weight", [e]), (b + "attn_k_norm.weight", [kv])]
        if spec.arch == "gemma2":
            out += [(b + "post_attention_norm.weight", [e]), (b + "post_ffw_norm.weight", [e])]
        out.append((b + "ffn_norm.weight", [e]))
        if spec.n_expert:
            x = spec.n_expert
            out += [(b + "ffn_gate_inp.weight", [e, x]), (b + "ffn_gate_exps.weight", [e, spec.n_ff, x]),
                    (b + "ffn_down_exps.weight", [spec.n_ff, e, x]), (b + "ffn_up_exps.weight", [e, spec.n_ff, x])]
        else:
            out += [(b + "ffn_gate.weight", [e, spec.n_ff]), (b + "ffn_down.weight", [spec.n_ff, e]),
                    (b + "ffn_up.weight", [e, spec.n_ff])]
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
        head_count_kv=spec.n_head_kv, key_length=spec.head_dim, value_length=spec.head_dim,
        rope_dimension_count=spec.head_dim, rope_freq_base=spec.rope_base, layer_norm_rms_eps=spec.rms_eps,
        vocab_size=spec.n_vocab)
    if spec.sliding_window:
        add_hparams(w, sliding_window=spec.sliding_window)
    if spec.arch == "gemma2":
        add_hparams(w, attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
    if spec.n_expert:
        add_hparams(w, expert_count=spec.n_expert, expert_used_count=spec.n_expert_used)
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
