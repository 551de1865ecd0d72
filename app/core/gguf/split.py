"""Where a model's weight bytes sit (per layer, experts, embeddings, output), and one GGUFInfo for a model
split into parts by llama.cpp's gguf-split.

`place_bytes` is the one place that sorts tensors by name: the header reader uses it for a single file, and
`merge_split` for the tensors of every part together (parts after the first carry only `split.*` metadata and
their own tensor table). `split_parts` finds the parts a name like `m-00001-of-00003.gguf` calls for, within
llama.cpp's own limit on their number, and says which are missing in a bounded line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.core.gguf.facts import GGUFInfo, TensorInfo

LAYER_NAME = re.compile(r"^blk\.(\d+)\.")
SPLIT_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
# gguf-split writes `split.count` as a uint16 and llama.cpp's loader reads it as one: no model it can load
# has more parts. A name claiming more (up to 99,999 fit its five digits) is refused without enumerating them.
MAX_SPLIT_PARTS = 65535
SHOWN_MISSING = 3  # missing parts named in the message; the rest are counted


@dataclass
class SplitParts:
    """The parts of a (possibly) split model, as found on disk."""

    count: int  # parts the name calls for (1: not a split name)
    parts: list[Path] = field(default_factory=list)  # those present (links too, even dangling), in order
    n_missing: int = 0  # parts that are not there as readable files
    first_missing: list[str] = field(default_factory=list)  # the first SHOWN_MISSING of them, by name
    problem: str | None = None  # why the model cannot be loaded as named; None when complete

    @property
    def complete(self) -> bool:
        return self.problem is None


def split_parts(first: Path) -> SplitParts:
    """The parts `first` (a single file, or part 1 of a split model) calls for.

    At most MAX_SPLIT_PARTS names are made, and the message about missing parts names SHOWN_MISSING of them
    and counts the rest: a hostile `x-00001-of-65535.gguf` costs one listing of its folder and one line.
    """
    m = SPLIT_NAME.search(first.name)
    if not m:
        return SplitParts(count=1, parts=[first])
    count = int(m.group(2))
    if not 1 <= count <= MAX_SPLIT_PARTS:
        return SplitParts(count=count, parts=[first], problem=(
            f"not a loadable split model: the name claims {count:,} parts (llama.cpp splits a model into "
            f"1 to {MAX_SPLIT_PARTS:,})"))
    name = first.name
    stem, of, ext = name[: m.start()], name[m.end(1): m.start(2)], name[m.end(2):]  # "-of-", ".gguf" as spelt
    try:
        present: set[str] | None = set(os.listdir(first.parent))  # one listing, not a stat per claimed part
    except OSError:
        present = None
    out = SplitParts(count=count)
    for i in range(1, count + 1):
        part = f"{stem}-{i:05d}{of}{count:05d}{ext}"
        listed = part in present if present is not None else os.path.lexists(first.parent / part)
        if listed:
            out.parts.append(first.parent / part)
        if not listed or not out.parts[-1].exists():  # a dangling link: listed (to be removed), yet missing
            out.n_missing += 1
            if len(out.first_missing) < SHOWN_MISSING:
                out.first_missing.append(part)
    if out.n_missing:
        names = ", ".join(out.first_missing)
        if out.n_missing > SHOWN_MISSING:
            names = f"{out.n_missing:,} of {count:,} parts: {names}, …"
        out.problem = f"split model incomplete: missing {names}"
    return out


@dataclass
class PlacedBytes:
    layer: list[int]  # per repeating layer (block)
    expert: list[int]  # per layer, the MoE experts' share of `layer`
    token_embd: int
    output: int  # the input embedding's size when the output matrix is tied to it
    other: int  # norms and anything outside the blocks
    tied_output: bool

    def info_fields(self) -> dict[str, Any]:
        """The GGUFInfo fields these fill."""
        return {"layer_bytes": self.layer, "expert_bytes": self.expert, "token_embd_bytes": self.token_embd,
                "output_bytes": self.output, "other_bytes": self.other, "tied_output": self.tied_output}


def place_bytes(tensors: Iterable[TensorInfo], n_layers: int) -> PlacedBytes:
    placed = PlacedBytes([0] * n_layers, [0] * n_layers, 0, 0, 0, True)
    for t in tensors:
        m = LAYER_NAME.match(t.name)
        if m and int(m.group(1)) < n_layers:
            il = int(m.group(1))
            placed.layer[il] += t.n_bytes
            if "_exps." in t.name:
                placed.expert[il] += t.n_bytes
        elif t.name == "token_embd.weight":
            placed.token_embd = t.n_bytes
        elif t.name == "output.weight":
            placed.output, placed.tied_output = t.n_bytes, False
        else:
            placed.other += t.n_bytes
    if placed.tied_output:
        placed.output = placed.token_embd
    return placed


def merge_split(first: GGUFInfo, others: list[list[TensorInfo]]) -> GGUFInfo:
    """One GGUFInfo for a split model: metadata from part 1, tensors and byte counts from every part."""
    if not others:
        return first
    tensors = list(first.tensors) + [t for part in others for t in part]
    return replace(first, n_params=sum(t.n_elements for t in tensors), tensor_bytes=sum(t.n_bytes for t in tensors),
                   tensors=tensors, **place_bytes(tensors, first.n_layers).info_fields())
