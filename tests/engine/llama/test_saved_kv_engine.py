"""Saved KV on the real default model: a chat of a few turns, the engine restarted (a new process), and the next
turn loads the chat's KV cache from disk instead of prefilling it, with the same greedy reply as a full
prefill; a damaged, foreign or refused state file means a prefill and a note, never a failure (nor a hang: a
FIFO at the state's path); a state that claims cells its tokens do not have is refused before llama.cpp sees
it, its checksum recomputed or not; the folder keeps to its budget."""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

import pytest

from app.core.chat import saved_kv as S
from app.engine import protocol as P
from app.engine.client import EngineClient

pytestmark = pytest.mark.model

GREEDY = P.Sampling(temperature=0.0, max_tokens=16, seed=1)
QUESTIONS = ["Write a short poem about the sea and the wind, please.", "Now one about mountains.",
             "And one about rivers."]


def _config(model: Path, folder: Path | None, budget_mib: int = 64, n_ctx: int = 1024,
            eager_mib: int = 64) -> P.LoadConfig:
    return P.LoadConfig(model_path=str(model), n_ctx=n_ctx, n_threads=1, warmup=False,
                        kv_store_dir=str(folder) if folder else None, kv_store_budget_mib=budget_mib,
                        kv_save_eager_mib=eager_mib)


def _turn(client: EngineClient, messages: list[dict[str, str]], conv: str | None = "chat-1",
          ) -> tuple[P.Done, P.Prefilled]:
    req = P.Generate(request_id=client.new_request_id(), messages=messages, sampling=GREEDY, conversation_id=conv)
    done = prefilled = None
    for event in client.generate(req, timeout=300):
        if isinstance(event, P.Prefilled):
            prefilled = event
        elif isinstance(event, P.Done):
            done = event
    assert done is not None and prefilled is not None
    client.stats()  # answered once the engine has written the chat's state (it does so right after Done)
    return done, prefilled


def _chat(client: EngineClient, turns: int = 2) -> list[dict[str, str]]:
    """A few turns; returns the messages of the next turn (history + a new question)."""
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    for question in QUESTIONS[1:turns + 1]:
        done, _ = _turn(client, messages)
        messages += [{"role": "assistant", "content": done.text}, {"role": "user", "content": question}]
    return messages


def test_a_restarted_engine_restores_the_chat_instead_of_prefilling(default_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    with EngineClient() as client:
        client.load(_config(default_model, folder))
        messages = _chat(client)
        (state,) = folder.iterdir()
        saved = S.read_header(state).tokens
        live, _ = _turn(client, messages, conv=None)  # the next turn on the live cache (no restart; nothing saved)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600

    with EngineClient() as client:  # a new engine process: its cache starts empty
        client.load(_config(default_model, folder))
        restored, prefilled_event = _turn(client, messages)
    with EngineClient() as client:  # the same turn without saved KV: a full prefill
        client.load(_config(default_model, None))
        prefilled, _ = _turn(client, messages)

    m, full = restored.metrics, prefilled.metrics
    assert full["prefill_tokens"] == full["prompt_tokens"] and full["kv_restored_tokens"] == 0
    assert m["prompt_tokens"] == full["prompt_tokens"] == live.metrics["prompt_tokens"]
    assert 0 < m["kv_restored_tokens"] <= len(saved)
    assert m["kv_restored_tokens"] == live.metrics["reused_tokens"]  # all the live cache held, from disk
    assert m["prefill_tokens"] == m["prompt_tokens"] - m["kv_restored_tokens"]  # only the new question evaluated
    assert m["prefill_tokens"] < full["prefill_tokens"] / 3
    assert m["kv_restore_ms"] > 0 and m["kv_restore_prefill_ms"] > 0 and m["kv_restore_note"] == ""
    assert (prefilled_event.restored_tokens, prefilled_event.restore_prefill_ms) == \
        (m["kv_restored_tokens"], m["kv_restore_prefill_ms"])
    assert restored.text.strip()
    assert restored.text == live.text  # the restored cache is the live one, to the bit
    assert restored.text == prefilled.text  # and the greedy reply is the one a full prefill gives


def _damage_cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-5000])


def _damage_garbage(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-20000:-10000] = b"\xa5" * 10000
    path.write_bytes(bytes(raw))


def _tampered(path: Path, at: int | None = None, value: int = 0, tokens: list[int] | None = None) -> None:
    """The state with the i32 at `at` set to `value` (or saved with other `tokens`), its checksum recomputed:
    what someone who can write the file can do."""
    header = S.read_header(path)
    state = S.read_state(path, header)
    # magic, seq_id, n_stream, then the first cell (pos, n_seq_id, seq_id) of the full cache: one a token
    assert struct.unpack_from("=IiII", state) == (0xAF143CD8, 0, 1, len(header.tokens))
    if at is not None:
        struct.pack_into("=i", state, at, value)
    S.write_state(path, header.key, header.tokens if tokens is None else tokens, bytes(state), None)


def _not_a_llama_state(path: Path) -> None:
    header = S.read_header(path)
    S.write_state(path, header.key, header.tokens, b"\x01\x00\x00\x00" + b"\xff" * 4000, None)


def _position_minus_one(path: Path) -> None:
    _tampered(path, at=16, value=-1)  # the first cell's position: 0xffffffff on disk


def _one_token_more(path: Path) -> None:
    tokens = S.read_header(path).tokens
    _tampered(path, tokens=[*tokens, tokens[-1]])


def _a_token_outside_the_vocabulary(path: Path) -> None:
    tokens = S.read_header(path).tokens
    _tampered(path, tokens=[*tokens[:-1], 1 << 30])


def _refused_by_llama_cpp(path: Path) -> None:
    """A state whose cells are right but whose first K tensor has another type: llama.cpp refuses it."""
    n = len(S.read_header(path).tokens)
    _tampered(path, at=16 + 12 * n + 8, value=0)  # past the cells, v_trans and n_layer: f16 (1) -> f32 (0)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)  # opening it for reading waited for a writer: the engine hung


@pytest.mark.timeout(240)  # a guard against a hang (the FIFO), well above what the three engines take
@pytest.mark.parametrize(("damage", "reason"), [
    (_damage_cut, "it is cut short"), (_damage_garbage, "it is damaged (checksum mismatch)"),
    (_not_a_llama_state, "its state is not one llama.cpp wrote for a sequence"),
    (_position_minus_one, "a cell of its state claims position -1 (0xffffffff), outside its"),
    (_one_token_more, "its state holds"),
    (_a_token_outside_the_vocabulary, "its tokens include 1073741824, which is not in the model's vocabulary"),
    (_refused_by_llama_cpp, "llama.cpp could not load it"),
    (_fifo, "it is not a regular file (a FIFO)"),
    (None, "it was made with context size 512, the model is loaded with 1024"),  # a foreign state
])
def test_a_damaged_or_foreign_state_file_means_a_prefill_and_a_note(default_model: Path, tmp_path: Path,
                                                                    damage, reason: str) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "kv"
    with EngineClient() as client:
        client.load(_config(default_model, folder, n_ctx=1024 if damage else 512))
        messages = _chat(client, turns=1)
    (state,) = folder.iterdir()
    if damage is not None:
        damage(state)
    with EngineClient() as client:  # a fresh engine: the turn must come from the file or from a full prefill
        client.load(_config(default_model, folder))
        done, live = _turn(client, messages)
    m = done.metrics
    assert m["kv_restored_tokens"] == 0 and m["prefill_tokens"] == m["prompt_tokens"]
    assert f"saved KV of this chat not used: {reason}" in m["kv_restore_note"]
    assert m["kv_restore_note"].endswith("prefilled instead") and live.restore_note == m["kv_restore_note"]
    assert S.read_header(state).key["n_ctx"] == 1024  # the chat's state written anew, for this load
    with EngineClient() as client:
        client.load(_config(default_model, None))
        reference, _ = _turn(client, messages)
    assert done.text == reference.text


def _long_turn(client: EngineClient, conv: str) -> Path:
    """One turn of ~110 prompt tokens (a state of ~2.2 MB on the default model); returns its state file."""
    _turn(client, [{"role": "user", "content": QUESTIONS[0] + " " + " ".join([conv] * 90)}], conv=conv)
    return S.file_for(client_folder(client), conv)


def client_folder(client: EngineClient) -> Path:
    return Path(client.kv_folder)  # type: ignore[attr-defined]


def test_states_keep_to_the_budget_and_zero_turns_saving_off(default_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    with EngineClient() as client:
        client.kv_folder = folder  # type: ignore[attr-defined]
        client.load(_config(default_model, folder, budget_mib=0))
        _long_turn(client, "z")
        assert not folder.exists() or not list(folder.iterdir())
        client.load(_config(default_model, folder, budget_mib=1))  # a state of ~2.2 MB does not fit 1 MiB
        _long_turn(client, "z")
        assert not folder.exists() or not list(folder.iterdir())
        budget = 5 << 20
        client.load(_config(default_model, folder, budget_mib=5))
        a = _long_turn(client, "a")
        b = _long_turn(client, "b")
        sizes = [a.stat().st_size, b.stat().st_size]
        c = _long_turn(client, "c")
        sizes.append(c.stat().st_size)
        assert sizes[0] + sizes[1] <= budget < sum(sizes)  # two fit, three do not
        assert not a.exists() and b.exists() and c.exists()  # the least recently used went
        assert S.folder_bytes(folder) <= budget


def test_a_big_state_is_written_when_its_chat_is_left(default_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    with EngineClient() as client:
        client.kv_folder = folder  # type: ignore[attr-defined]
        client.load(_config(default_model, folder, eager_mib=0))  # every state counts as big here
        a = _long_turn(client, "a")
        assert not a.exists()  # not after the reply: the chat may go on
        b = _long_turn(client, "b")  # another chat's turn: a's cache is written before it is replaced
        assert a.exists() and not b.exists()
        assert len(S.read_header(a).tokens) > 100  # a's chat, not b's first tokens
    assert b.exists()  # written at shutdown
