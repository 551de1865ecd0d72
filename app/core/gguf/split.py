"""Where a model's weight bytes sit (per layer, experts, embeddings, output), and one GGUFInfo for a model
split into parts by llama.cpp's gguf-split.

`place_bytes` is the one place that sorts tensors by name: the header reader uses it for a single file, and
`merge_split` for the tensors of every part together (parts after the first carry only `split.*` metadata and
their own tensor table).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from app.core.gguf.facts import GGUFInfo, TensorInfo

LAYER_NAME = re.compile(r"^blk\.(\d+)\.")


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
