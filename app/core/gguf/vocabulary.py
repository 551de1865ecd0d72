"""The tokenizer part of a GGUF header, and whether two models number their tokens the same way.

A draft model's token ids only mean something to the main model when both vocabularies agree: the same
tokenizer model, the same token list, the same merges, and the same BOS/EOS ids (what llama.cpp's own
speculative example compares). `vocab_mismatch` says why not, in words, for the engine (`--draft-model`)
and the window's draft-model picker alike. The header is read here, string by string, instead of with
gguf.GGUFReader, which takes seconds on a 262k-token vocabulary.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import IO, Any

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_WANTED = ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
           "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.token_type")
TOKEN_CONTROL = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL in tokenizer.ggml.token_type


@dataclass
class Vocabulary:
    """The tokenizer part of a GGUF header."""

    model: str = ""
    tokens: list[bytes] = field(default_factory=list)
    merges: list[bytes] = field(default_factory=list)
    bos: int | None = None
    eos: int | None = None
    token_types: list[int] = field(default_factory=list)  # per token: 1 normal, 3 control, 6 byte, ...


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
            size = struct.calcsize(_SCALARS[etype])
            if keep:
                return list(struct.unpack(f"<{count}{_SCALARS[etype][1]}", _read(f, count * size)))
            f.seek(count * size, 1)
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
            elif key == "tokenizer.ggml.token_type":
                vocab.token_types = value or []
    return vocab


def vocab_mismatch(main: Vocabulary, draft: Vocabulary) -> str | None:
    """Why a draft model's tokens cannot stand for the main model's (None: they can)."""
    if not main.tokens or not draft.tokens:
        return "one of the files has no token list in its header"
    if main.model != draft.model:
        return f"different tokenizers ({main.model!r} vs the draft's {draft.model!r})"
    if len(main.tokens) != len(draft.tokens):
        return f"different vocabulary sizes ({len(main.tokens)} vs the draft's {len(draft.tokens)} tokens)"
    for i, (a, b) in enumerate(zip(main.tokens, draft.tokens, strict=False)):
        if a != b:
            return (f"token {i} differs ({a.decode('utf-8', 'replace')!r} vs the draft's "
                    f"{b.decode('utf-8', 'replace')!r})")
    if main.merges != draft.merges:
        return f"different BPE merges ({len(main.merges)} vs the draft's {len(draft.merges)})"
    if (main.bos, main.eos) != (draft.bos, draft.eos):
        return f"different BOS/EOS ids ({main.bos}/{main.eos} vs the draft's {draft.bos}/{draft.eos})"
    return None


def draft_problem(main_path: str, draft_path: str) -> str | None:
    """Why the GGUF at `draft_path` cannot draft for the one at `main_path`, in one sentence (None: it can)."""
    if not os.path.isfile(draft_path):
        return f"Draft model not found: {draft_path}"
    try:
        problem = vocab_mismatch(read_vocabulary(main_path), read_vocabulary(draft_path))
    except (OSError, ValueError, struct.error) as exc:
        return f"Cannot read the draft model's tokenizer from its header: {exc}"
    if problem:
        return f"{os.path.basename(draft_path)} cannot draft for this model: {problem}."
    return None


def draft_candidates(main_path: str, candidates: list[str]) -> list[tuple[str, str | None]]:
    """Each candidate with why it cannot draft for the model at `main_path` (None: it can). The main model's
    header is read once, so a library of models with 150k-token vocabularies is checked in one pass."""
    try:
        main = read_vocabulary(main_path)
    except (OSError, ValueError, struct.error) as exc:
        return [(c, f"the loaded model's tokenizer cannot be read: {exc}") for c in candidates]
    out: list[tuple[str, str | None]] = []
    for path in candidates:
        if os.path.abspath(path) == os.path.abspath(main_path):
            out.append((path, "it is the loaded model itself"))
            continue
        try:
            problem = vocab_mismatch(main, read_vocabulary(path))
        except (OSError, ValueError, struct.error) as exc:
            problem = f"its tokenizer cannot be read: {exc}"
        out.append((path, problem))
    return out
