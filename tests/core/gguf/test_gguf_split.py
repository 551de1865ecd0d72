"""A split model's facts are the single file's facts: one function sorts tensor bytes for both."""

from __future__ import annotations

import ast
from pathlib import Path

from app.core.gguf.info import info_from_header, parse_header
from app.core.gguf.split import merge_split, place_bytes
from big_gguf import write_header_only

APP = Path(__file__).resolve().parents[3] / "app"


def test_merging_the_parts_gives_the_whole_file(tmp_path: Path) -> None:
    path = write_header_only(tmp_path / "m.gguf", "Q4_K_M", n_layers=4, n_embd=256, n_ff=512, n_head=4,
                             n_head_kv=2, n_vocab=1000)
    data = path.read_bytes()[: 1 << 20]
    whole = info_from_header(parse_header(data, path.stat().st_size))
    head = [t for t in whole.tensors if not t.name.startswith("blk.3.") and t.name != "output.weight"]
    tail = [t for t in whole.tensors if t not in head]
    first = info_from_header(parse_header(data, path.stat().st_size))
    first.tensors = head
    placed = place_bytes(head, first.n_layers)
    first.layer_bytes, first.other_bytes, first.output_bytes = placed.layer, placed.other, placed.output
    first.tied_output = placed.tied_output
    merged = merge_split(first, [tail])
    assert first.layer_bytes[3] == 0 and first.tied_output
    for name in ("layer_bytes", "expert_bytes", "token_embd_bytes", "output_bytes", "other_bytes", "tied_output",
                 "tensor_bytes", "n_params"):
        assert getattr(merged, name) == getattr(whole, name), name


def test_one_merge_split_and_one_tensor_sorter() -> None:
    defined = [f"{p.relative_to(APP)}:{n.name}" for p in APP.rglob("*.py")
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(n, ast.FunctionDef) and n.name in ("merge_split", "place_bytes")]
    assert sorted(defined) == ["core/gguf/split.py:merge_split", "core/gguf/split.py:place_bytes"]
    gguf = APP / "core" / "gguf"
    assert "blk\\." not in (gguf / "info.py").read_text() + (gguf / "remote_header.py").read_text()
