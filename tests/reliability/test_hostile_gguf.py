"""Hostile GGUF metadata: values of the wrong type or far out of range in the keys the estimators read.

Each file is a valid GGUF (generated with the `gguf` package) whose header lies: `block_count` in the
millions, a string, NaN or infinity where a count belongs, negative widths. `info`, `recommend`, `models` and
`search` answer in one line naming the key; `library.describe` never raises; nothing allocates per the lie.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from app import cli
from app.core.config import paths
from app.core.gguf import remote_header as remote_gguf
from app.core.gguf.info import GGUFError, inspect_gguf
from app.core.hub import listing as hub
from app.core.models import library
from hubserver import HubServer
from reliability_plugin import record

BASE: dict[str, tuple[str, Any]] = {
    "llama.block_count": ("uint32", 2),
    "llama.context_length": ("uint32", 2048),
    "llama.embedding_length": ("uint32", 256),
    "llama.feed_forward_length": ("uint32", 512),
    "llama.attention.head_count": ("uint32", 4),
    "llama.attention.head_count_kv": ("uint32", 2),
}

# key -> (GGUF value type, hostile value). Kept below ~5 million so a planted bug costs memory, not the machine.
HOSTILE: dict[str, tuple[str, str, Any]] = {
    "layers in the millions": ("llama.block_count", "uint32", 5_000_000),
    "layers as text": ("llama.block_count", "string", "many"),
    "context as text": ("llama.context_length", "string", "abc"),
    "context NaN": ("llama.context_length", "float32", math.nan),
    "context infinite": ("llama.context_length", "float64", math.inf),
    "context negative": ("llama.context_length", "int32", -5),
    "width negative": ("llama.embedding_length", "int64", -1),
    "width huge": ("llama.embedding_length", "uint64", 1 << 40),
    "heads as text": ("llama.attention.head_count", "string", "4"),
    "kv heads negative in an array": ("llama.attention.head_count_kv", "array", [2, -3]),
    "ffn huge": ("llama.feed_forward_length", "uint64", 1 << 40),
    "experts huge": ("llama.expert_count", "uint32", 4_000_000_000),
    "vocab huge": ("llama.vocab_size", "uint64", 1 << 40),
    "sliding window NaN": ("llama.attention.sliding_window", "float32", math.nan),
    "key length as bool": ("llama.attention.key_length", "bool", True),
}


def hostile_gguf(path: Path, key: str, kind: str, value: Any) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("hostile")
    fields = dict(BASE)
    fields[key] = (kind, value)
    for k, (t, v) in fields.items():
        getattr(w, f"add_{t}")(k, v)
    w.add_tensor("token_embd.weight", np.zeros((260, 256), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((256, 256), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _one_line_naming(text: str, key: str) -> None:
    assert "Traceback" not in text
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    assert key in lines[0], lines[0]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_metadata_gets_one_line_from_every_command(case: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    key, kind, value = HOSTILE[case]
    model = hostile_gguf(tmp_path / "hostile.gguf", key, kind, value)
    with pytest.raises(GGUFError, match=key.replace(".", r"\.")):
        inspect_gguf(model)
    for command in (["info", "-m", str(model)], ["recommend", "-m", str(model)]):
        assert cli.main(command) == 1
        out = capsys.readouterr()
        assert out.out == ""
        _one_line_naming(out.err, key)
    # The library lists it as broken (describe never raises), and `models` prints it as such.
    entry = library.describe(model, "models")
    assert entry.info is None and entry.broken and key in entry.broken
    paths.models_dir().mkdir(parents=True, exist_ok=True)
    model.rename(paths.models_dir() / "hostile.gguf")
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if "hostile.gguf" in ln)
    assert "BROKEN" in row and key in row
    record("hostile inputs refused")


def test_library_describe_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = hostile_gguf(tmp_path / "odd.gguf", "llama.context_length", "uint32", 4096)

    def explode(path: Any) -> Any:  # whatever a future check misses must still become a broken entry
        raise ZeroDivisionError("an estimator bug")

    monkeypatch.setattr(library, "inspect_gguf", explode)
    entry = library.describe(model, "models")
    assert entry.broken and "ZeroDivisionError" in entry.broken
    (tmp_path / "odd.gguf.roofline.json").write_text("[1, 2]")  # provenance that is JSON but not an object
    monkeypatch.undo()
    entry = library.describe(model, "models")
    assert entry.broken is None and entry.provenance == {}
    record("hostile inputs refused")


def test_the_same_bytes_from_the_hub_give_search_one_line(hub_server: HubServer, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    key, kind, value = HOSTILE["layers in the millions"]
    model = hostile_gguf(tmp_path / "m-Q8_0.gguf", key, kind, value)
    hub_server.state.add_repo("acme/Lying-GGUF", {"m-Q8_0.gguf": model})
    (vh,) = remote_gguf.fetch_variant_headers(hub.list_variants("acme/Lying-GGUF"))
    assert vh.info is None and vh.error and key in vh.error
    assert cli.main(["search", "acme/Lying-GGUF"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    row = next(ln for ln in out.out.splitlines() if "Q8_0" in ln)
    assert "unreadable header" in row and key in row
    record("hostile inputs refused")


def test_real_models_still_pass_the_checks(default_model: Path) -> None:
    info = inspect_gguf(default_model)  # Gemma 3: per-layer arrays, sliding window, 262k vocabulary
    assert info.n_layers > 0 and info.sliding_window > 0 and info.n_vocab > 200_000
