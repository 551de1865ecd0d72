"""Discover's recommendations: a short, curated list of small instruct models, with a verdict for this machine.

The bundled model is a tiny *base* model (it continues text); these are chat models a new user can start with.
Each entry names a GGUF file on the hub (repo, file, quantization, approximate size, licence) and the model's
shape as published (layers, widths, heads, vocabulary, trained context). From the shape the estimators get the
`GGUFInfo` a header of that shape would give (`shape_info`), so the list and its verdicts need no connection:
only Download does. The hub's listing gives exact sizes once online.
`tests/core/models/test_curated_models.py` checks each shape that the zoo also models against the zoo's real header.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.gguf.facts import GGUFInfo, TensorInfo
from app.core.models.fit import LIBRARY_CTX, LibraryFit
from app.core.predict.recommend import Candidate, Machine, recommend

MB = 1_000_000


@dataclass(frozen=True)
class CuratedModel:
    title: str
    repo_id: str
    file: str
    quant: str
    size: int  # bytes, approximate (the hub's listing has the exact size)
    licence: str
    params_b: float  # published parameter count, billions
    note: str  # what it is good for, one phrase
    arch: str
    n_layers: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    n_ctx_train: int
    tied: bool
    sliding_window: int = 0  # Gemma 2: every other layer attends to a 4096-token window


CURATED: tuple[CuratedModel, ...] = (
    CuratedModel("Qwen2.5 0.5B Instruct", "bartowski/Qwen2.5-0.5B-Instruct-GGUF",
                 "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", "Q4_K_M", 398 * MB, "apache-2.0", 0.49,
                 "the smallest usable chat model; fast anywhere", "qwen2", 24, 896, 4864, 14, 2, 64, 151936,
                 32768, True),
    CuratedModel("Llama 3.2 1B Instruct", "bartowski/Llama-3.2-1B-Instruct-GGUF",
                 "Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M", 808 * MB, "llama3.2", 1.24,
                 "small, good English chat, 128k context", "llama", 16, 2048, 8192, 32, 8, 64, 128256, 131072, True),
    CuratedModel("Qwen2.5 1.5B Instruct", "bartowski/Qwen2.5-1.5B-Instruct-GGUF",
                 "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf", "Q4_K_M", 986 * MB, "apache-2.0", 1.54,
                 "small, multilingual, decent at code", "qwen2", 28, 1536, 8960, 12, 2, 128, 151936, 32768, True),
    CuratedModel("Gemma 2 2B it", "bartowski/gemma-2-2b-it-GGUF", "gemma-2-2b-it-Q4_K_M.gguf", "Q4_K_M",
                 1710 * MB, "gemma", 2.61, "strong writing for its size; 8k context", "gemma2", 26, 2304, 9216, 8, 4,
                 256, 256000, 8192, True, sliding_window=4096),
    CuratedModel("Qwen2.5 3B Instruct", "bartowski/Qwen2.5-3B-Instruct-GGUF", "Qwen2.5-3B-Instruct-Q4_K_M.gguf",
                 "Q4_K_M", 1930 * MB, "qwen-research", 3.09, "a good all-rounder on a laptop", "qwen2", 36, 2048,
                 11008, 16, 2, 128, 151936, 32768, True),
    CuratedModel("Llama 3.2 3B Instruct", "bartowski/Llama-3.2-3B-Instruct-GGUF",
                 "Llama-3.2-3B-Instruct-Q4_K_M.gguf", "Q4_K_M", 2020 * MB, "llama3.2", 3.21,
                 "a good all-rounder, 128k context", "llama", 28, 3072, 8192, 24, 8, 128, 128256, 131072, True),
    CuratedModel("Phi-3.5 mini instruct", "bartowski/Phi-3.5-mini-instruct-GGUF",
                 "Phi-3.5-mini-instruct-Q4_K_M.gguf", "Q4_K_M", 2390 * MB, "mit", 3.82,
                 "reasoning and maths for its size", "phi3", 32, 3072, 8192, 32, 32, 96, 32064, 131072, False),
    CuratedModel("Mistral 7B Instruct v0.3", "bartowski/Mistral-7B-Instruct-v0.3-GGUF",
                 "Mistral-7B-Instruct-v0.3-Q4_K_M.gguf", "Q4_K_M", 4370 * MB, "apache-2.0", 7.25,
                 "a classic 7B; needs 8 GB of memory", "llama", 32, 4096, 14336, 32, 8, 128, 32768, 32768, False),
    CuratedModel("Qwen2.5 7B Instruct", "bartowski/Qwen2.5-7B-Instruct-GGUF", "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
                 "Q4_K_M", 4680 * MB, "apache-2.0", 7.62, "the best of this list if it fits; code and maths",
                 "qwen2", 28, 3584, 18944, 28, 4, 128, 152064, 32768, False),
)


def shape_info(m: CuratedModel) -> GGUFInfo:
    """The facts the estimators need, from the published shape alone (no header read): the tensor table a
    llama.cpp quantizer writes for this shape and quantization (app/core/bench/zoo.py's), so memory and speed are
    estimated exactly as for a downloaded file of that shape. Phi-3's fused QKV and gate/up matrices are
    listed as separate ones with the same elements: the same bytes and FLOPs."""
    from app.core.bench.zoo import ZooSpec, tensor_table

    spec = ZooSpec(m.title, m.title, "gemma2" if m.arch == "gemma2" else "llama", m.n_layers, m.n_embd, m.n_ff,
                   m.n_head, m.n_head_kv, m.head_dim, m.n_vocab, m.n_ctx_train, m.tied, qkv_bias=m.arch == "qwen2",
                   sliding_window=m.sliding_window, params_b=m.params_b)
    tensors, offset = [], 0
    layer_bytes = [0] * m.n_layers
    embd = output = other = 0
    for name, shape, qtype, n_el, n_bytes in tensor_table(spec, m.quant):
        tensors.append(TensorInfo(name, qtype, shape, n_el, n_bytes, offset))
        offset += n_bytes
        if name.startswith("blk."):
            layer_bytes[int(name.split(".")[1])] += n_bytes
        elif name == "token_embd.weight":
            embd = n_bytes
        elif name == "output.weight":
            output = n_bytes
        else:
            other += n_bytes
    header = m.n_vocab * 12 + 65536  # the vocabulary dominates a header: ~12 bytes a token
    return GGUFInfo(
        architecture=m.arch, name=m.title, n_params=sum(t.n_elements for t in tensors), n_layers=m.n_layers,
        n_head=[m.n_head] * m.n_layers, n_head_kv=[m.n_head_kv] * m.n_layers, head_dim_k=m.head_dim,
        head_dim_v=m.head_dim, n_embd=m.n_embd, n_ff=m.n_ff, n_ctx_train=m.n_ctx_train,
        sliding_window=m.sliding_window, swa_layers=[m.sliding_window > 0 and i % 2 == 0 for i in range(m.n_layers)],
        file_type=m.quant, tensor_bytes=offset, layer_bytes=layer_bytes, expert_bytes=[0] * m.n_layers,
        token_embd_bytes=embd, output_bytes=embd if m.tied else output, other_bytes=other, tied_output=m.tied,
        n_vocab=m.n_vocab, expert_count=0, expert_used_count=0, chat_template="(in the file)", header_size=header,
        data_offset=header, file_size=header + offset, path=None, size_label=f"{m.params_b:g}B", tensors=tensors)


@dataclass
class CuratedFit:
    model: CuratedModel
    fit: LibraryFit

    @property
    def runs(self) -> bool:
        return self.fit.runs


def assess_curated(machine: Machine, n_ctx: int = LIBRARY_CTX,
                   models: tuple[CuratedModel, ...] = CURATED) -> list[CuratedFit]:
    """Every curated model with its verdict and predicted speeds on `machine`, in the list's order."""
    out = []
    for m in models:
        rec = recommend([Candidate(shape_info(m), name=m.quant, size=m.size)], machine, n_ctx=n_ctx)
        v = rec.variants[0]
        out.append(CuratedFit(m, LibraryFit(v.verdict, v.n_gpu_layers, dict(v.max_ctx), v.prefill_tps,
                                            v.decode_tps, v.speed_label, v.decode_bound, rec.sentence)))
    return out


def best_pick(fits: list[CuratedFit]) -> CuratedFit | None:
    """The largest model that runs at a chat speed (≥ 8 tok/s predicted decode), else the fastest that runs."""
    running = [f for f in fits if f.runs]
    chatty = [f for f in running if f.fit.decode_tps >= 8.0]
    if chatty:
        return max(chatty, key=lambda f: f.model.params_b)
    return max(running, key=lambda f: f.fit.decode_tps, default=None)
