"""105 corrupted GGUFs (seeded, reproducible): each is a clear error or a harmless load, never a crash of the caller.

100 mutations of a tiny synthetic model (truncations, bit flips in header and tensor data, wrong magic and
version, absurd tensor/metadata counts, dimensions, types, offsets and string lengths) and 5 of the real default
model's header (its 262k-token vocabulary makes the header 6.5 MB). Every file goes through both doors the app
has: `app.core.gguf.info.inspect_gguf` (the library, the model picker) and the engine's load. Structural damage
must be refused with a plain message; a flipped bit that leaves the structure valid (a letter in a name, a weight)
may load, and then must generate. The engine either survives each file or dies alone and is restarted.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core.gguf.info import GGUFError, inspect_gguf, parse_header
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from reliability_plugin import record
from synth_gguf import write_synthetic_gguf

SEED = 20261129


@dataclass
class Case:
    name: str
    data: bytes
    must_fail: bool  # structural damage: both doors must refuse it


def _tensor_infos(data: bytes) -> list[tuple[int, int]]:
    """(position of n_dims, n_dims) of every tensor-table entry, found by walking the header like a reader."""
    raw = parse_header(data, len(data))
    out = []
    names = [t.name.encode() for t in raw.tensors]
    start = data.find(struct.pack("<Q", len(names[0])) + names[0])
    pos = start
    for name, _t in zip(names, raw.tensors, strict=False):
        assert data[pos + 8:pos + 8 + len(name)] == name
        pos += 8 + len(name)
        n_dims = struct.unpack_from("<I", data, pos)[0]
        out.append((pos, n_dims))
        pos += 4 + 8 * n_dims + 4 + 8
    assert pos == raw.header_size
    return out


def _set(data: bytes, pos: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


def _flip(data: bytes, rng: random.Random, lo: int, hi: int, bits: int) -> bytes:
    b = bytearray(data)
    for _ in range(bits):
        i = rng.randrange(lo, hi)
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def synthetic_cases(clean: bytes) -> list[Case]:
    rng = random.Random(SEED)
    raw = parse_header(clean, len(clean))
    hdr, data_off = raw.header_size, raw.data_offset
    data_end = data_off + max(t.offset + t.n_bytes for t in raw.tensors)
    infos = _tensor_infos(clean)
    n_t, n_kv = len(raw.tensors), len(raw.metadata)
    cases: list[Case] = []
    for _ in range(10):  # cut inside the header
        cut = rng.randrange(0, hdr)
        cases.append(Case(f"truncated-header-{cut}", clean[:cut], True))
    for _ in range(10):  # cut inside the tensor data (a download that stopped early)
        cut = rng.randrange(data_off, data_end)
        cases.append(Case(f"truncated-data-{cut}", clean[:cut], True))
    for i in range(25):
        cases.append(Case(f"header-bitflip-{i}", _flip(clean, rng, 0, hdr, rng.randint(1, 4)), False))
    for i in range(10):
        cases.append(Case(f"data-bitflip-{i}", _flip(clean, rng, data_off, data_end, rng.randint(1, 64)), False))
    for magic in (b"GGML", b"GGJT", b"\0\0\0\0", b"FUGG", bytes(rng.randrange(256) for _ in range(4))):
        cases.append(Case(f"magic-{magic.hex()}", magic + clean[4:], True))
    for version in (0, 1, 4, 99, 0xFFFFFFFF):
        cases.append(Case(f"version-{version}", _set(clean, 4, "<I", version), True))
    for count, fatal in ((1 << 63, True), ((1 << 20) + 1, True), (n_t + 1, True), (n_t - 1, False), (0, False)):
        cases.append(Case(f"tensor-count-{count}", _set(clean, 8, "<Q", count), fatal))
    for count, fatal in ((1 << 40, True), ((1 << 16) + 1, True), (n_kv + 1, True), (n_kv - 1, False),
                         (0, False)):
        cases.append(Case(f"kv-count-{count}", _set(clean, 16, "<Q", count), fatal))
    for dim in ((1 << 40) + 1, 0, 1 << 63, 3, 7, 1 << 41):  # absurd, or not the tensor's real row length
        pos, nd = infos[rng.randrange(len(infos))]
        cases.append(Case(f"dim-{dim}", _set(clean, pos + 4, "<Q", dim), True))
    for bad in (0, 5, 1 << 20, 0xFFFFFFFF):  # an impossible number of dimensions
        pos, nd = infos[rng.randrange(len(infos))]
        cases.append(Case(f"n-dims-{bad}", _set(clean, pos, "<I", bad), True))
    for type_id in (200, 0xFFFFFFFF, 4, 5, 1000):  # 4 and 5 are retired types (Q4_2, Q4_3)
        pos, nd = infos[rng.randrange(len(infos))]
        cases.append(Case(f"type-{type_id}", _set(clean, pos + 4 + 8 * nd, "<I", type_id), True))
    for off in (1 << 50, len(clean), (1 << 64) - 1, data_end, 1 << 40):
        pos, nd = infos[-1]  # the last tensor: any larger offset leaves the file
        cases.append(Case(f"offset-{off}", _set(clean, pos + 4 + 8 * nd + 4, "<Q", off), True))
    for length in (1 << 62, (1 << 26) + 1, 1 << 40, len(clean), (1 << 64) - 1):  # first metadata key's length
        cases.append(Case(f"key-length-{length}", _set(clean, 24, "<Q", length), True))
    assert len(cases) == 100
    return [Case(f"{i:03d}-{c.name}", c.data, c.must_fail) for i, c in enumerate(cases)]


def default_model_cases(model: Path) -> list[Case]:
    with model.open("rb") as fh:
        head = fh.read(8 << 20)
    raw = parse_header(head)
    hdr = raw.header_size
    header = head[:hdr]
    key = b"tokenizer.ggml.tokens"
    at = header.find(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    vocab_count_pos = at + 4 + 4  # value type (array), element type (string), then the count
    assert struct.unpack_from("<Q", header, vocab_count_pos)[0] == 262144
    return [
        Case("gemma-header-only", head[: raw.data_offset], True),
        Case("gemma-cut-in-vocabulary", header[: vocab_count_pos + 3_000_000], True),
        Case("gemma-vocab-count-2^40", _set(head, vocab_count_pos, "<Q", 1 << 40), True),
        Case("gemma-tensor-count-2^62", _set(head, 8, "<Q", 1 << 62), True),
        Case("gemma-bad-magic", b"GGUG" + head[4:], True),
    ]


def _clear(message: str) -> bool:
    """A message for people: says something, names no Python internals, not a wall of text."""
    return 10 <= len(message) <= 2000 and "Traceback" not in message and "object at 0x" not in message


@pytest.mark.model
def test_corrupted_ggufs_are_refused_clearly_and_never_crash_the_caller(default_model: Path, tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "clean.gguf", n_layers=1, tensor_type="Q8_0", n_ff=256)
    clean = src.read_bytes()
    cases = synthetic_cases(clean) + default_model_cases(default_model)
    outcomes: dict[str, str] = {}
    client = EngineClient()
    client.start()
    try:
        for i, case in enumerate(cases):
            path = tmp_path / f"{case.name}.gguf"
            path.write_bytes(case.data)
            # Door 1: the header reader used by the library and the model picker.
            try:
                inspect_gguf(path)
                header_ok = True
            except GGUFError as exc:
                header_ok = False
                assert _clear(str(exc)), (case.name, str(exc))
            # Door 2: the engine.
            if not client.alive:
                client.start()
                record("engine restarts")
            try:
                client.load(P.LoadConfig(model_path=str(path), n_ctx=256, n_threads=1), timeout=60)
            except EngineError as exc:
                err = exc.error
                if err.kind == "engine_died":
                    # Counted first, so the summary shows it whatever fails next; never acceptable (below).
                    outcomes[case.name] = "engine died"
                    record("engine crashes on corrupt files")
                    client.close()
                    continue
                outcomes[case.name] = "refused"
                assert err.kind == "load_failed", (case.name, err)
                assert _clear(err.message), (case.name, err.message)
                assert not err.fatal and client.alive, case.name  # a bad file never costs the engine
                if not header_ok:
                    assert "not a usable GGUF" in err.message, (case.name, err.message)
                continue
            # It loaded: only a file whose structure survived may, and it must then work.
            assert header_ok and not case.must_fail, f"{case.name} loaded although it is structurally broken"
            tokens = list(client.generate(P.Generate(request_id=f"g{i}", prompt="ab", sampling=P.Sampling(
                temperature=0.0, max_tokens=2, ignore_eos=True)), timeout=60))
            assert isinstance(tokens[-1], P.Done), case.name
            outcomes[case.name] = "loaded"
        # After all that, the engine (or its replacement) still loads and runs the clean model.
        if not client.alive:
            client.start()
        client.load(P.LoadConfig(model_path=str(src), n_ctx=256, n_threads=1), timeout=60)
        done = list(client.generate(P.Generate(request_id="final", prompt="ab", sampling=P.Sampling(
            temperature=0.0, max_tokens=3, ignore_eos=True)), timeout=60))[-1]
        assert isinstance(done, P.Done) and done.metrics["generated_tokens"] == 3
    finally:
        client.close()
        # recorded however the loop ended, so the summary never hides a case that stopped the test
        record("corrupt files rejected", sum(v == "refused" for v in outcomes.values()))
        record("corrupt files loaded harmlessly", sum(v == "loaded" for v in outcomes.values()))
    refused = sum(v == "refused" for v in outcomes.values())
    crashed = sorted(name for name, v in outcomes.items() if v == "engine died")
    assert not crashed, f"the engine process died on: {crashed}"
    assert len(outcomes) == len(cases) == 105
    # Every structurally broken file was refused; bit flips that left a valid file are allowed to load.
    assert all(outcomes[c.name] != "loaded" for c in cases if c.must_fail)
    assert refused >= sum(c.must_fail for c in cases)
