"""A model's use from the user's own chat store: measured decode points by depth and the longest chat, and the
context-from-use advice built on it (app.core.chat.model_usage, app.core.predict.context_use)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.bench.zoo import zoo_path
from app.core.chat.model_usage import model_usage, summarize
from app.core.chat.store import ChatStore
from app.core.gguf.info import inspect_gguf
from app.core.predict.context_use import MIN_FREED, context_advice, suggested_context
from app.core.predict.memory import MemoryConfig, estimate_memory


def reply(prompt: int, gen: int, decode_ms: float, **extra: object) -> dict[str, object]:
    return {"prompt_tokens": prompt, "generated_tokens": gen, "decode_tokens": gen - 1, "decode_ms": decode_ms,
            "kv_cells_used": prompt + gen, **extra}


def test_summary_keeps_local_plain_decodes_as_points() -> None:
    usage = summarize([
        reply(1000, 101, 2000.0),  # 100 tokens in 2 s at a mean depth of 1050
        reply(100, 11, 200.0),
        reply(3000, 101, 1000.0, source="client-side wall clock"),  # a remote server: no point
        reply(200, 51, 500.0, draft_tokens=30),  # drafting: not a plain decode rate
        {"prompt_tokens": 50},  # nothing decoded
        "not a dict",  # type: ignore[list-item]
    ])
    assert usage.replies == 5
    assert usage.max_tokens == 3101
    assert [(p.depth, p.decode_tps) for p in usage.points] == [(105.0, 50.0), (1050.0, 50.0)]


def test_store_query_is_per_model_file(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "chats.db")
    conv = store.create_conversation()
    for model, prompt in (("/m/a.gguf", 900), ("/m/a.gguf", 2900), ("/m/b.gguf", 7000)):
        store.add_message(conv.id, "user", "hi")
        msg = store.add_message(conv.id, "assistant", "ok", model=model)
        store.update_message(msg.id, metrics=reply(prompt, 41, 400.0))
    bad = store.add_message(conv.id, "assistant", "x", model="/m/a.gguf")
    store.query("UPDATE messages SET metrics = 'not json' WHERE id = ?", (bad.id,))
    usage = model_usage(store, "/m/a.gguf")
    assert usage.replies == 2 and usage.max_tokens == 2941
    assert model_usage(store, "/m/c.gguf").replies == 0
    store.close()


def test_suggested_context_has_room_above_the_longest_chat() -> None:
    assert suggested_context(3100) == 4096
    assert suggested_context(3300) == 8192  # 3300 × 1.25 > 4096
    assert suggested_context(100) == 2048


@pytest.fixture(scope="module")
def llama1b(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return inspect_gguf(zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path_factory.mktemp("zoo")))


def test_advice_says_what_a_smaller_context_frees(llama1b) -> None:  # type: ignore[no-untyped-def]
    cfg = MemoryConfig(n_ctx=32768)
    advice = context_advice(llama1b, cfg, reached=3100, replies=5, has_gpu=False)
    assert advice is not None and advice.suggested == 4096
    freed = estimate_memory(llama1b, cfg, has_gpu=False).total - \
        estimate_memory(llama1b, MemoryConfig(n_ctx=4096), has_gpu=False).total
    assert advice.freed_bytes == freed > 0
    assert advice.line.startswith("your chats with this model reached 3.1k tokens; 4k would free ")
    assert advice.line.endswith("GiB") or advice.line.endswith("MiB")


def test_no_advice_without_use_or_when_the_context_is_already_small(llama1b) -> None:  # type: ignore[no-untyped-def]
    assert context_advice(llama1b, MemoryConfig(n_ctx=32768), 3100, replies=2, has_gpu=False) is None
    assert context_advice(llama1b, MemoryConfig(n_ctx=4096), 3100, replies=9, has_gpu=False) is None
    # 2k instead of 4k frees 64 MiB of KV and a little compute: under MIN_FREED, not worth a setting change
    small = estimate_memory(llama1b, MemoryConfig(n_ctx=4096), has_gpu=False).total - \
        estimate_memory(llama1b, MemoryConfig(n_ctx=2048), has_gpu=False).total
    assert 0 < small < MIN_FREED
    assert context_advice(llama1b, MemoryConfig(n_ctx=4096), 500, replies=9, has_gpu=False) is None
