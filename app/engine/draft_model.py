"""Speculative decoding with a small draft model that shares the main model's vocabulary.

The draft model proposes a few tokens greedily; the main model checks them in one batch (the verification,
acceptance and KV trimming are PromptLookup's, app.engine.speculative), so with greedy sampling the output
is exactly what the main model alone would write; only the number of main-model calls changes.

Drafted token ids are only meaningful when both models number their tokens the same way, so a draft is
accepted only when the GGUF headers agree: the same tokenizer model, the same token list, the same merges,
and the same BOS/EOS ids (what llama.cpp's own speculative example compares). `vocab_mismatch` says why
not, in words. The header is read here, string by string, instead of with gguf.GGUFReader, which takes
seconds on a 262k-token vocabulary.

Imported only by the engine worker.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import llama_cpp

from app.core.sampling import Sampler
from app.engine.decoding import logits_row, reuse_prefix
from app.engine.speculative import PromptLookup

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_WANTED = ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
           "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")


@dataclass
class Vocabulary:
    """The tokenizer part of a GGUF header."""

    model: str = ""
    tokens: list[bytes] = field(default_factory=list)
    merges: list[bytes] = field(default_factory=list)
    bos: int | None = None
    eos: int | None = None


def _read(f: IO[bytes], n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ValueError("the file ends inside its header")
    return data


def _string(f: IO[bytes]) -> bytes:
    (n,) = struct.unpack("<Q", _read(f, 8))
    if n > 1 << 24:
        raise ValueError("a header string is implausibly long")
    return _read(f, n)


def _value(f: IO[bytes], vtype: int, keep: bool) -> Any:
    if vtype in _SCALARS:
        fmt = _SCALARS[vtype]
        return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]
    if vtype == _STRING:
        return _string(f)
    if vtype == _ARRAY:
        (etype,) = struct.unpack("<I", _read(f, 4))
        (count,) = struct.unpack("<Q", _read(f, 8))
        if count > 1 << 26:
            raise ValueError("a header array is implausibly long")
        if etype == _STRING:
            if keep:
                return [_string(f) for _ in range(count)]
            for _ in range(count):
                (n,) = struct.unpack("<Q", _read(f, 8))
                f.seek(n, 1)
            return None
        if etype in _SCALARS:
            f.seek(count * struct.calcsize(_SCALARS[etype]), 1)
            return None
        raise ValueError(f"unsupported array element type {etype}")
    raise ValueError(f"unknown header value type {vtype}")


def read_vocabulary(path: str) -> Vocabulary:
    """The tokenizer keys of a GGUF file's header; raises ValueError for a file that is not GGUF."""
    vocab = Vocabulary()
    with open(path, "rb", buffering=1 << 20) as f:
        if _read(f, 4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        (version,) = struct.unpack("<I", _read(f, 4))
        if version < 2:
            raise ValueError(f"GGUF version {version} is too old")
        _n_tensors, n_kv = struct.unpack("<QQ", _read(f, 16))
        for _ in range(n_kv):
            key = _string(f).decode("utf-8", "replace")
            (vtype,) = struct.unpack("<I", _read(f, 4))
            value = _value(f, vtype, keep=key in _WANTED)
            if key == "tokenizer.ggml.model":
                vocab.model = value.decode("utf-8", "replace") if isinstance(value, bytes) else ""
            elif key == "tokenizer.ggml.tokens":
                vocab.tokens = value or []
            elif key == "tokenizer.ggml.merges":
                vocab.merges = value or []
            elif key == "tokenizer.ggml.bos_token_id":
                vocab.bos = int(value)
            elif key == "tokenizer.ggml.eos_token_id":
                vocab.eos = int(value)
    return vocab


def vocab_mismatch(main: Vocabulary, draft: Vocabulary) -> str | None:
    """Why a draft model's tokens cannot stand for the main model's (None: they can)."""
    if not main.tokens or not draft.tokens:
        return "one of the files has no token list in its header"
    if main.model != draft.model:
        return f"different tokenizers ({main.model!r} vs the draft's {draft.model!r})"
    if len(main.tokens) != len(draft.tokens):
        return f"different vocabulary sizes ({len(main.tokens)} vs the draft's {len(draft.tokens)} tokens)"
    for i, (a, b) in enumerate(zip(main.tokens, draft.tokens)):
        if a != b:
            return (f"token {i} differs ({a.decode('utf-8', 'replace')!r} vs the draft's "
                    f"{b.decode('utf-8', 'replace')!r})")
    if main.merges != draft.merges:
        return f"different BPE merges ({len(main.merges)} vs the draft's {len(draft.merges)})"
    if (main.bos, main.eos) != (draft.bos, draft.eos):
        return f"different BOS/EOS ids ({main.bos}/{main.eos} vs the draft's {draft.bos}/{draft.eos})"
    return None


class DraftModel:
    """A loaded draft model that proposes the next tokens greedily for a given history."""

    def __init__(self, llm: Any, max_draft: int) -> None:
        self.llm = llm
        self.max_draft = max(1, max_draft)
        self.seconds = 0.0  # time spent drafting (part of the cost of speculation)

    @classmethod
    def load(cls, path: str, n_ctx: int, n_threads: int, n_threads_batch: int, max_draft: int) -> DraftModel:
        llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads_batch,
                              n_gpu_layers=0, verbose=False)
        return cls(llm, max_draft)

    def close(self) -> None:
        self.llm.close()

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        """Up to `k` greedy tokens after `history` (its cached prefix is reused: only new tokens are fed)."""
        llm = self.llm
        k = min(k, self.max_draft, llm.n_ctx() - len(history) - 1, llm.input_ids.shape[0] - len(history) - 1)
        if k <= 0:
            return []
        t0 = time.perf_counter()
        prefix = reuse_prefix(llm, history)
        llm.eval(list(history[prefix:]))
        out: list[int] = []
        while True:
            token = int(logits_row(llm).argmax())
            out.append(token)
            if len(out) >= k or llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                break
            llm.eval([token])
        self.seconds += time.perf_counter() - t0
        return out


class DraftModelLookup(PromptLookup):
    """PromptLookup's verification with drafts from a draft model instead of from the text so far."""

    def __init__(self, llm: Any, sampler: Sampler, draft: DraftModel, plain_ms_hint: float | None = None) -> None:
        super().__init__(llm, sampler, max_draft=draft.max_draft, plain_ms_hint=plain_ms_hint)
        self.draft_model = draft

    def draft(self, history: list[int], k: int) -> list[int]:
        t0 = time.perf_counter()
        tokens = self.draft_model.propose(history, k)
        self.batch_s += time.perf_counter() - t0  # drafting is part of what a verified batch costs
        return tokens


def open_draft(main_path: str, draft_path: str, main_llm: Any, max_draft: int) -> tuple[DraftModel | None, str | None]:
    """The draft model for `main_llm`, or (None, the reason in words) when it cannot serve as one."""
    import os

    if not os.path.isfile(draft_path):
        return None, f"Draft model not found: {draft_path}"
    try:
        problem = vocab_mismatch(read_vocabulary(main_path), read_vocabulary(draft_path))
    except (OSError, ValueError, struct.error) as exc:
        return None, f"Cannot read the draft model's tokenizer from its header: {exc}"
    if problem:
        return None, f"{os.path.basename(draft_path)} cannot draft for this model: {problem}."
    params = main_llm.context_params
    try:
        return DraftModel.load(draft_path, main_llm.n_ctx(), params.n_threads, params.n_threads_batch,
                               max_draft), None
    except Exception as exc:  # noqa: BLE001 - llama.cpp reports a bad file as a generic failure
        return None, f"llama.cpp could not load the draft model: {exc}"
