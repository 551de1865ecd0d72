"""What a GGUF file holds, read from its header alone: architecture, shapes, sizes, chat template.

The header (metadata + tensor table) sits at the start of the file, so the same parser serves a local
file and a byte prefix fetched from a remote server. `gguf.GGUFReader` would also work for local files,
but it decodes every vocabulary string into numpy objects (12 s for Gemma 3's 262k-token vocabulary)
and it memory-maps the whole file; this parser skips those arrays and only needs the header bytes.
Type tables (value types, quantization block sizes, file type names) come from the `gguf` package.

Bad input raises `GGUFError` with a plain message; a prefix that stops inside the header raises
`GGUFTruncated`, whose `needed` says how many bytes to fetch before asking again. Counts and lengths
are checked against hard limits and against the bytes present before anything is allocated.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGMLQuantizationType, LlamaFileType

from app.core.gguf.errors import GGUFError, GGUFTruncated
from app.core.gguf.facts import GGUFInfo, TensorInfo
from app.core.gguf.split import place_bytes
from app.core.gguf.values import SWA_PERIOD, check_metadata, per_layer, swa_layers

__all__ = ["SWA_PERIOD", "GGUFError", "GGUFInfo", "GGUFTruncated", "TensorInfo"]  # callers import them from here

# Limits far above any real model, far below what would exhaust memory.
MAX_TENSORS = 1 << 20
MAX_KV = 1 << 16
MAX_ARRAY = 1 << 26  # elements (largest vocabularies are ~1M tokens)
MAX_STRING = 1 << 26  # bytes (chat templates are a few KiB)
MAX_DIMS = 4  # GGML_MAX_DIMS
KEEP_ARRAY = 4096  # numeric arrays up to this length are kept (per-layer values); longer: length only
KEEP_STRING_ARRAY = 64  # string arrays up to this length are kept (tags, languages); longer: length only
FIRST_READ = 8 << 20  # most headers fit; Gemma 3's 262k vocabulary makes 6.5 MB


# ------------------------------------------------------------------------------------------ raw parse

_SCALAR = {  # GGUFValueType -> struct format
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
          12: "<f8"}
_STRING, _ARRAY = 8, 9


@dataclass
class RawHeader:
    version: int
    metadata: dict[str, Any]
    array_lengths: dict[str, int]
    tensors: list[TensorInfo]
    header_size: int  # end of the tensor table (bytes needed to parse the header)
    data_offset: int  # start of tensor data (header_size aligned)


class _Reader:
    def __init__(self, buf: bytes | memoryview, total_size: int | None):
        self.buf = memoryview(buf)
        self.pos = 0
        self.total = total_size

    def need(self, n: int) -> None:
        end = self.pos + n
        if end > len(self.buf):
            if self.total is not None and end > self.total:
                raise GGUFError(f"file ends inside its header at byte {self.total} (truncated download?)")
            raise GGUFTruncated(end)

    def scalar(self, vtype: int) -> Any:
        fmt = _SCALAR[vtype]
        size = struct.calcsize(fmt)
        self.need(size)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u32(self) -> int:
        return int(self.scalar(4))

    def u64(self) -> int:
        return int(self.scalar(10))

    def string(self, what: str) -> str:
        n = self.u64()
        if n > MAX_STRING:
            raise GGUFError(f"absurd string length {n} in {what}")
        self.need(n)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_strings(self, count: int, what: str) -> None:
        buf, pos, end = self.buf, self.pos, len(self.buf)
        unpack = struct.Struct("<Q").unpack_from
        for i in range(count):
            if pos + 8 > end:
                self.pos = pos
                self._need_more(8 * (count - i), what)
            (n,) = unpack(buf, pos)
            if n > MAX_STRING:
                raise GGUFError(f"absurd string length {n} in {what}")
            pos += 8 + n
        if pos > end:
            self.pos = pos
            self._need_more(0, what)
        self.pos = pos

    def _need_more(self, extra: int, what: str) -> None:
        end = self.pos + extra
        if self.total is not None and end > self.total:
            raise GGUFError(f"file ends inside its header in {what} (truncated download?)")
        raise GGUFTruncated(max(end, len(self.buf) + 1))

    def value(self, vtype: int, key: str) -> tuple[Any, int | None]:
        """(value, array length or None). Long arrays come back as None with their length."""
        if vtype == _STRING:
            return self.string(key), None
        if vtype in _SCALAR:
            return self.scalar(vtype), None
        if vtype != _ARRAY:
            raise GGUFError(f"unknown value type {vtype} for key {key!r}")
        itype = self.u32()
        count = self.u64()
        if count > MAX_ARRAY:
            raise GGUFError(f"absurd array length {count} for key {key!r}")
        if itype == _STRING:
            if count <= KEEP_STRING_ARRAY:
                return [self.string(key) for _ in range(count)], count
            self.skip_strings(count, key)
            return None, count
        if itype not in _NUMPY:
            raise GGUFError(f"unsupported array element type {itype} for key {key!r}")
        size = np.dtype(_NUMPY[itype]).itemsize * count
        self.need(size)
        value: Any = None
        if count <= KEEP_ARRAY:
            arr = np.frombuffer(self.buf, dtype=_NUMPY[itype], count=count, offset=self.pos)
            value = [bool(x) for x in arr] if itype == 7 else arr.tolist()
        self.pos += size
        return value, count


def parse_header(buf: bytes | memoryview, total_size: int | None = None) -> RawHeader:
    """Parse metadata and tensor table from the first bytes of a GGUF file."""
    r = _Reader(buf, total_size)
    r.need(4)
    if bytes(r.buf[:4]) != struct.pack("<I", GGUF_MAGIC):
        raise GGUFError("not a GGUF file (bad magic)")
    r.pos = 4
    version = r.u32()
    if version not in (2, 3):
        raise GGUFError(f"unsupported GGUF version {version} (expected 2 or 3)")
    n_tensors = r.u64()
    n_kv = r.u64()
    if n_tensors > MAX_TENSORS:
        raise GGUFError(f"absurd tensor count {n_tensors}")
    if n_kv > MAX_KV:
        raise GGUFError(f"absurd metadata count {n_kv}")
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for _ in range(n_kv):
        key = r.string("metadata key")
        vtype = r.u32()
        value, count = r.value(vtype, key)
        metadata[key] = value
        if count is not None:
            lengths[key] = count
    tensors: list[TensorInfo] = []
    for _ in range(n_tensors):
        name = r.string("tensor name")
        n_dims = r.u32()
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})")
        shape = [r.u64() for _ in range(n_dims)]
        type_id = r.u32()
        offset = r.u64()
        try:
            qtype = GGMLQuantizationType(type_id)
            block, type_size = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise GGUFError(f"tensor {name!r} has unknown type id {type_id}") from None
        n_el = 1
        for d in shape:
            if d == 0 or d > 1 << 40:
                raise GGUFError(f"tensor {name!r} has absurd shape {shape}")
            n_el *= d
        if n_el > 1 << 44 or shape[0] % block:
            raise GGUFError(f"tensor {name!r}: shape {shape} does not fit type {qtype.name}")
        tensors.append(TensorInfo(name, qtype.name, shape, n_el, n_el // block * type_size, offset))
    header_size = r.pos
    align = metadata.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise GGUFError(f"bad general.alignment {align!r}")
    data_offset = (header_size + align - 1) // align * align
    if total_size is not None:
        for t in tensors:
            if data_offset + t.offset + t.n_bytes > total_size:
                raise GGUFError(f"tensor {t.name!r} extends past the end of the file ({total_size} bytes): "
                                "truncated download?")
    return RawHeader(version, metadata, lengths, tensors, header_size, data_offset)


# ------------------------------------------------------------------------------------------ the facts


def file_type_name(value: Any) -> str:
    """general.file_type number -> 'Q4_K_M' (llama.cpp's spelling); '' when unknown."""
    try:
        name = LlamaFileType(int(value)).name
    except (TypeError, ValueError):
        return ""
    return {"ALL_F32": "F32", "GUESSED": ""}.get(name, name.removeprefix("MOSTLY_"))




def info_from_header(raw: RawHeader, path: str | None = None, file_size: int | None = None) -> GGUFInfo:
    """Turn a parsed header into the facts estimators need."""
    meta = raw.metadata
    arch = str(meta.get("general.architecture") or "")
    if not arch:
        raise GGUFError("no general.architecture in the metadata: not a model file")

    check_metadata(arch, meta)  # every value used below: a whole number in range, or GGUFError naming the key

    def key(name: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{name}", default)

    n_layers = int(key("block_count", 0) or 0)
    n_embd = int(key("embedding_length", 0) or 0)
    n_head = per_layer(key("attention.head_count"), n_layers, 0)
    n_head_kv = per_layer(key("attention.head_count_kv", key("attention.head_count")), n_layers, 0)
    head0 = next((h for h in n_head if h), 0)
    default_head = n_embd // head0 if head0 else 0
    head_k = int(key("attention.key_length", default_head) or 0)
    head_v = int(key("attention.value_length", default_head) or 0)
    n_ff_v = key("feed_forward_length", 0)
    n_ff = int(max(n_ff_v) if isinstance(n_ff_v, list) and n_ff_v else (n_ff_v or 0))
    n_swa = int(key("attention.sliding_window", 0) or 0)


    n_vocab = raw.array_lengths.get("tokenizer.ggml.tokens") or int(key("vocab_size", 0) or 0)
    if not n_vocab:
        emb = next((t for t in raw.tensors if t.name == "token_embd.weight"), None)
        n_vocab = emb.shape[1] if emb and len(emb.shape) > 1 else 0
    file_type = file_type_name(meta.get("general.file_type"))
    if not file_type and raw.tensors:  # guess: the type holding most bytes
        by_type: dict[str, int] = {}
        for t in raw.tensors:
            by_type[t.ggml_type] = by_type.get(t.ggml_type, 0) + t.n_bytes
        file_type = max(by_type, key=lambda k: by_type[k])
    template = meta.get("tokenizer.chat_template")
    small_meta = {k: v for k, v in meta.items() if k != "tokenizer.chat_template"}
    return GGUFInfo(
        architecture=arch,
        name=str(meta.get("general.name") or (Path(path).stem if path else arch)),
        n_params=sum(t.n_elements for t in raw.tensors),
        n_layers=n_layers,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_k,
        head_dim_v=head_v,
        n_embd=n_embd,
        n_ff=n_ff,
        n_ctx_train=int(key("context_length", 0) or 0),
        sliding_window=n_swa,
        swa_layers=swa_layers(arch, meta, n_layers, n_swa),
        file_type=file_type,
        tensor_bytes=sum(t.n_bytes for t in raw.tensors),
        **place_bytes(raw.tensors, n_layers).info_fields(),
        n_vocab=int(n_vocab),
        expert_count=int(key("expert_count", 0) or 0),
        expert_used_count=int(key("expert_used_count", 0) or 0),
        chat_template=str(template) if template else None,
        header_size=raw.header_size,
        data_offset=raw.data_offset,
        file_size=file_size,
        path=path,
        gguf_version=raw.version,
        size_label=str(meta.get("general.size_label") or ""),
        metadata=small_meta,
        tensors=raw.tensors,
    )


# ------------------------------------------------------------------------------------------ entry points


def required_prefix_size(prefix: bytes, total_size: int | None = None) -> int:
    """Bytes of the file needed to parse its header.

    Exact (the end of the tensor table) when `prefix` already holds the whole header; otherwise a lower
    bound larger than len(prefix): fetch at least that many (doubling is a good strategy) and ask again.
    """
    try:
        return parse_header(prefix, total_size).header_size
    except GGUFTruncated as exc:
        return exc.needed


def inspect_gguf_bytes(prefix: bytes, total_size: int | None = None, path: str | None = None) -> GGUFInfo:
    """Facts from a byte prefix of a GGUF file (e.g. a remote HTTP range). `total_size` enables checks."""
    return info_from_header(parse_header(prefix, total_size), path=path, file_size=total_size)


def read_header_bytes(read_at: Callable[[int], bytes], total_size: int | None,
                      first: int = FIRST_READ) -> bytes:
    """Fetch just enough of a file's start to parse its header; `read_at(n)` returns the first n bytes."""
    n = first if total_size is None else min(first, total_size)
    while True:
        data = read_at(n)
        try:
            parse_header(data, total_size)
            return data
        except GGUFTruncated as exc:
            if len(data) < n:  # source shorter than asked: it ended inside the header
                raise GGUFError(f"file ends inside its header at byte {len(data)}") from None
            n = max(exc.needed, 2 * n)
            if total_size is not None:
                n = min(n, total_size)


def inspect_gguf(path: str | Path) -> GGUFInfo:
    """Facts about a local GGUF file, reading only its header."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            def read_at(n: int) -> bytes:
                fh.seek(0)
                return fh.read(n)

            data = read_header_bytes(read_at, size)
    except OSError as exc:
        raise GGUFError(f"cannot read {p}: {exc.strerror or exc}") from exc
    return info_from_header(parse_header(data, size), path=str(p), file_size=size)


# ------------------------------------------------------------------------------------------ chat template


class ChatTemplateChoice(NamedTuple):
    name: str  # "gguf" when the file has its own, else a built-in format name ("gemma", "chatml", ...)
    source: str  # "gguf" | "architecture" | "fallback"


def choose_chat_template(info: GGUFInfo) -> ChatTemplateChoice:
    """Which chat format to use: the file's own template, else one chosen from the architecture.

    The table of built-in formats and the rendering live in `app.core.chat.templates`; this applies
    it to a GGUF's facts. The file's own Jinja text is `info.chat_template`.
    """
    from app.core.chat.templates import select_template

    chosen = select_template(info.architecture.lower(), info.chat_template)
    return ChatTemplateChoice(chosen.name, chosen.source)
