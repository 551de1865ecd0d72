"""GGUF header facts: the default model's known facts, agreement with llama.cpp and gguf.GGUFReader,
prefix parsing of remote headers, bad input, chat-template choice, and the `roofline info` command."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import random
import struct
from pathlib import Path

import gguf
import pytest

from app.core.gguf.info import (
    GGUFError,
    GGUFTruncated,
    choose_chat_template,
    inspect_gguf,
    inspect_gguf_bytes,
    read_header_bytes,
    required_prefix_size,
)
from synth_gguf import write_synthetic_gguf

# ----------------------------------------------------------------------------- the default model


@pytest.fixture(scope="module")
def gemma(default_model: Path):  # type: ignore[no-untyped-def]
    return inspect_gguf(default_model)


def test_default_model_facts(gemma) -> None:  # type: ignore[no-untyped-def]
    # Published Gemma 3 270M facts (reference.md), not read back from our own output.
    assert gemma.architecture == "gemma3"
    assert gemma.n_layers == 18
    assert set(gemma.n_head) == {4} and set(gemma.n_head_kv) == {1}
    assert gemma.head_dim_k == gemma.head_dim_v == 256
    assert gemma.sliding_window == 512
    assert gemma.swa_pattern == "5:1"
    # every 6th layer (il = 5, 11, 17) is full attention
    assert [il for il, s in enumerate(gemma.swa_layers) if not s] == [5, 11, 17]
    assert gemma.n_ctx_train == 32768
    assert gemma.file_type == "Q4_K_M"
    assert gemma.tied_output and gemma.output_bytes == gemma.token_embd_bytes
    assert gemma.token_embd_bytes == 640 * 262144 * 34 // 32  # Q8_0: 34 bytes per 32 weights
    assert abs(gemma.tensor_bytes / 1e6 - 246.6) < 0.1
    assert gemma.n_vocab == 262144
    assert gemma.chat_template is None
    assert not gemma.is_moe
    assert sum(gemma.layer_bytes) + gemma.token_embd_bytes + gemma.other_bytes == gemma.tensor_bytes
    assert choose_chat_template(gemma) == ("gemma", "architecture")


def _llama_view(path: Path) -> dict[str, object]:
    """What llama.cpp itself reads from the file (low-level API, no context)."""
    import llama_cpp

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, "llama.cpp could not load the model"
    try:
        meta: dict[str, str] = {}
        key = ctypes.create_string_buffer(512)
        val = ctypes.create_string_buffer(1 << 16)
        for i in range(llama_cpp.llama_model_meta_count(model)):
            llama_cpp.llama_model_meta_key_by_index(model, i, key, len(key))
            llama_cpp.llama_model_meta_val_str_by_index(model, i, val, len(val))
            meta[key.value.decode()] = val.value.decode(errors="replace")
        vocab = llama_cpp.llama_model_get_vocab(model)
        return {
            "meta": meta,
            "n_params": llama_cpp.llama_model_n_params(model),
            "size": llama_cpp.llama_model_size(model),
            "n_ctx_train": llama_cpp.llama_model_n_ctx_train(model),
            "n_layer": llama_cpp.llama_model_n_layer(model),
            "n_head": llama_cpp.llama_model_n_head(model),
            "n_head_kv": llama_cpp.llama_model_n_head_kv(model),
            "n_embd": llama_cpp.llama_model_n_embd(model),
            "n_swa": llama_cpp.llama_model_n_swa(model),
            "n_vocab": llama_cpp.llama_vocab_n_tokens(vocab),
            "ftype": llama_cpp.llama_model_ftype(model),
        }
    finally:
        llama_cpp.llama_model_free(model)


def _same_value(ours: object, theirs: str) -> bool:
    if isinstance(ours, bool):
        return theirs == ("true" if ours else "false")
    if isinstance(ours, float):
        return abs(ours - float(theirs)) <= 1e-6 + 1e-5 * abs(ours)
    return str(ours) == theirs


def _assert_matches_llama(info, view) -> None:  # type: ignore[no-untyped-def]
    assert info.n_params == view["n_params"]
    assert info.tensor_bytes == view["size"]
    assert info.n_ctx_train == view["n_ctx_train"]
    assert info.n_layers == view["n_layer"]
    assert info.n_head[0] == view["n_head"] and info.n_head_kv[0] == view["n_head_kv"]
    assert info.n_embd == view["n_embd"]
    assert info.sliding_window == view["n_swa"]
    assert info.n_vocab == view["n_vocab"]
    assert info.metadata["general.file_type"] == view["ftype"]
    meta = view["meta"]
    scalars = {k: v for k, v in info.metadata.items() if v is not None and not isinstance(v, list)}
    assert scalars, "no scalar metadata parsed"
    for k, v in scalars.items():
        assert k in meta, f"llama.cpp does not report {k}"
        assert _same_value(v, meta[k]), f"{k}: ours {v!r}, llama.cpp {meta[k]!r}"


@pytest.mark.model
def test_default_model_matches_llama_cpp(gemma, default_model: Path) -> None:  # type: ignore[no-untyped-def]
    _assert_matches_llama(gemma, _llama_view(default_model))


def test_prefix_parse_equals_file_parse(gemma, default_model: Path) -> None:  # type: ignore[no-untyped-def]
    size = default_model.stat().st_size
    with default_model.open("rb") as fh:
        prefix = fh.read(gemma.header_size)
    assert required_prefix_size(prefix) == gemma.header_size
    remote = inspect_gguf_bytes(prefix, total_size=size)
    assert dataclasses.replace(remote, path=gemma.path) == gemma
    # One byte short: a clear "need more" with a usable lower bound.
    with pytest.raises(GGUFTruncated) as exc:
        inspect_gguf_bytes(prefix[:-1])
    assert exc.value.needed > gemma.header_size - 1
    assert "truncated header: need at least" in str(exc.value)


def test_remote_style_fetch_converges(gemma, default_model: Path) -> None:  # type: ignore[no-untyped-def]
    data = default_model.read_bytes()[: gemma.header_size + 4096]
    calls: list[int] = []

    def read_at(n: int) -> bytes:
        calls.append(n)
        return data[:n]

    got = read_header_bytes(read_at, total_size=None, first=1024)
    assert len(got) >= gemma.header_size
    assert len(calls) < 20  # doubling, not byte by byte
    assert inspect_gguf_bytes(got).n_layers == 18


# ----------------------------------------------------------------------------- synthetic files


@pytest.mark.parametrize("tensor_type,arch,tied", [("F32", "llama", False), ("Q8_0", "gemma3", True),
                                                   ("Q4_0", "llama", True)])
def test_synthetic_matches_gguf_reader(tmp_path: Path, tensor_type: str, arch: str, tied: bool) -> None:
    path = write_synthetic_gguf(tmp_path / "m.gguf", arch=arch, n_layers=6, tensor_type=tensor_type,
                                tied_output=tied, sliding_window=32, chat_template="{{ messages }}")
    info = inspect_gguf(path)
    reader = gguf.GGUFReader(path)
    assert [t.name for t in info.tensors] == [t.name for t in reader.tensors]
    assert [t.n_bytes for t in info.tensors] == [int(t.n_bytes) for t in reader.tensors]
    assert [t.n_elements for t in info.tensors] == [int(t.n_elements) for t in reader.tensors]
    assert [t.ggml_type for t in info.tensors] == [t.tensor_type.name for t in reader.tensors]
    assert info.data_offset == reader.data_offset
    assert info.file_type == tensor_type
    assert info.tied_output == tied
    assert info.n_vocab == 260 and info.n_layers == 6
    assert info.chat_template == "{{ messages }}"
    assert choose_chat_template(info) == ("gguf", "gguf")
    if arch == "gemma3":
        assert info.sliding_window == 32 and [il for il, s in enumerate(info.swa_layers) if not s] == [5]
    else:
        assert info.sliding_window == 0 and info.swa_pattern == ""


@pytest.mark.model
def test_synthetic_model_runs_in_llama_cpp(tmp_path: Path) -> None:
    import llama_cpp

    path = write_synthetic_gguf(tmp_path / "tiny.gguf", n_layers=2, n_head=4, n_head_kv=2)
    info = inspect_gguf(path)
    _assert_matches_llama(info, _llama_view(path))
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, verbose=False, seed=1)
    try:
        # byte fallback: any text tokenizes, UTF-8 included, and decodes back
        text = "Hello, wörld! 漢字"
        tokens = llm.tokenize(text.encode(), add_bos=False)
        assert llm.detokenize(tokens).decode().strip() == text
        out = llm("Hello", max_tokens=5, temperature=0.0)
        assert out["usage"]["completion_tokens"] >= 1
    finally:
        llm.close()


# ----------------------------------------------------------------------------- bad input


def _header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def test_bad_input_messages() -> None:
    with pytest.raises(GGUFError, match="bad magic"):
        inspect_gguf_bytes(b"GGML" + bytes(100))
    with pytest.raises(GGUFTruncated, match="need at least 4 bytes"):
        inspect_gguf_bytes(b"GG")
    with pytest.raises(GGUFError, match="absurd tensor count"):
        inspect_gguf_bytes(_header(1 << 40, 0))
    with pytest.raises(GGUFError, match="absurd metadata count"):
        inspect_gguf_bytes(_header(0, 1 << 60))
    huge_key = _header(0, 1) + struct.pack("<Q", 1 << 62)
    with pytest.raises(GGUFError, match="absurd string length"):
        inspect_gguf_bytes(huge_key)
    big_array = _header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 1 << 50)
    with pytest.raises(GGUFError, match="absurd array length"):
        inspect_gguf_bytes(big_array)
    with pytest.raises(GGUFError, match="version"):
        inspect_gguf_bytes(b"GGUF" + struct.pack("<IQQ", 99, 0, 0))
    with pytest.raises(GGUFError, match="architecture"):
        inspect_gguf_bytes(_header(0, 0))
    with pytest.raises(GGUFError, match="cannot read"):
        inspect_gguf("/nonexistent/model.gguf")


def test_truncated_file_is_reported(tmp_path: Path) -> None:
    path = write_synthetic_gguf(tmp_path / "m.gguf")
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])  # header intact, tensor data cut
    with pytest.raises(GGUFError, match="extends past the end"):
        inspect_gguf(cut)
    cut.write_bytes(data[:200])  # inside the header
    with pytest.raises(GGUFError, match="ends inside its header"):
        inspect_gguf(cut)


def test_corrupted_headers_never_crash(tmp_path: Path) -> None:
    """Random byte flips in a real header: either a valid parse or GGUFError, nothing else."""
    path = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=1, n_embd=64, n_ff=128)
    header = bytearray(path.read_bytes()[: inspect_gguf(path).header_size])
    rng = random.Random(7)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        data = bytearray(header)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(data))
            data[pos] = rng.randrange(256)
        try:
            inspect_gguf_bytes(bytes(data), total_size=len(data) + 10_000_000)
            outcomes["ok"] += 1
        except GGUFError:
            outcomes["error"] += 1
    assert outcomes["error"] > 0  # the check does see damage


# ----------------------------------------------------------------------------- chat templates


@pytest.mark.parametrize("arch,expected", [("gemma2", "gemma"), ("gemma3", "gemma"), ("qwen2", "chatml"),
                                           ("llama", "llama3"), ("phi3", "phi3"), ("mistral3", "mistral")])
def test_template_from_architecture(gemma, arch: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    info = dataclasses.replace(gemma, architecture=arch, chat_template=None)
    assert choose_chat_template(info) == (expected, "architecture")


# ----------------------------------------------------------------------------- CLI


def test_info_cli_json(default_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_layers"] == 18 and data["file_type"] == "Q4_K_M" and data["swa_pattern"] == "5:1"
    assert data["chat_template_choice"] == {"name": "gemma", "source": "architecture"}
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "5:1" in text and "tied to token_embd" in text and "32,768" in text


def test_info_cli_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    assert main(["info", "-m", str(bad)]) == 1
    assert "bad magic" in capsys.readouterr().err


def test_synthetic_vocab_is_distinct_at_any_size() -> None:
    from synth_gguf import byte_vocab

    tokens, scores, types = byte_vocab(5000)
    assert len(set(tokens)) == len(tokens) == len(scores) == len(types) == 5000
    assert tokens[3] == "<0x00>" and tokens[258] == "<0xFF>"
