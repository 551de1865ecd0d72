"""Saved KV in the engine process: write a conversation's KV cache after a reply, load it back before a later
prompt of the same chat instead of prefilling it again (llama.cpp's `llama_state_seq_get_data` /
`llama_state_seq_set_data` on sequence 0). The file format, its checks and the size budget are
app.core.chat.saved_kv's.

A restore happens only when it pays: the saved tokens must be a longer prefix of the new prompt than what
the live cache already holds (by `MIN_GAIN` tokens), so switching back to a chat restores it, the next turn
of the chat on screen does not. Whatever goes wrong (a file cut short or damaged, made with another model
or context, claiming cells its tokens do not have, refused by llama.cpp) leaves an empty cache and a note:
the prompt is then prefilled as usual. A state whose cells cannot be checked (app.core.chat.llama_state: caches
of recurrent and hybrid models) is not written at all.
"""

from __future__ import annotations

import ctypes
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp

from app.core.chat import saved_kv as S
from app.engine.llama.decoding import forget_prefill

if TYPE_CHECKING:
    from app.engine import protocol as P
    from app.engine.llama.worker.engine import Engine

SEQ = 0  # the chat engine keeps everything in sequence 0
MIN_GAIN = 16  # tokens: below this, reading a file costs about what evaluating them would
MIN_SAVE = 32  # tokens: a shorter chat prefills faster than its state is written
MIN_RATE_TOKENS = 32  # a prefill this long measures the prefill rate (shorter batches run slower per token)


@dataclass
class Restore:
    """What happened to the saved state before this request's prefill."""

    tokens: int = 0  # of the prompt's tokens, those that came from disk
    ms: float = 0.0
    note: str = ""
    saved_rate: float | None = None  # ms a token of prefill, measured where the state was made
    prefill_estimate_ms: float = 0.0

    def estimate(self, engine_rate: float | None, prompt_tokens: int, prefill_tokens: int, prefill_ms: float) -> None:
        """At the first token: the restored tokens the prefill really skipped (a cache that cannot drop a tail
        starts over), and what prefilling them would have cost: at this engine's measured prefill rate, else the
        one measured where the state was saved, else this reply's own prefill (few tokens: an upper bound)."""
        if not self.tokens:
            return
        self.tokens = min(self.tokens, max(0, prompt_tokens - prefill_tokens))
        if not self.tokens:
            self.note = "the saved KV was loaded but this cache could not keep it; prefilled instead"
            return
        rate = engine_rate or self.saved_rate or (prefill_ms / prefill_tokens if prefill_tokens else None)
        self.prefill_estimate_ms = self.tokens * rate if rate else 0.0

    def metrics(self) -> dict[str, Any]:
        return {"kv_restored_tokens": self.tokens, "kv_restore_ms": self.ms,
                "kv_restore_prefill_ms": self.prefill_estimate_ms, "kv_restore_note": self.note}


def enabled(engine: Engine, req: P.Generate) -> Path | None:
    cfg = engine.config
    if req.conversation_id is None or cfg is None or not cfg.kv_store_dir or cfg.kv_store_budget_mib <= 0:
        return None
    return S.file_for(cfg.kv_store_dir, req.conversation_id)


def state_key(engine: Engine) -> dict[str, Any]:
    cfg, loaded = engine.config, engine.loaded
    assert cfg is not None and loaded is not None
    return {**S.model_identity(cfg.model_path), "n_ctx": loaded.n_ctx, "type_k": cfg.type_k, "type_v": cfg.type_v,
            "flash_attn": engine._flash_used, "swa_full": cfg.swa_full, "llama_cpp": llama_cpp.__version__}


def restore(engine: Engine, req: P.Generate, prompt: list[int]) -> Restore:
    """Load the chat's saved state into the cache when it holds more of `prompt` than the cache does."""
    path = enabled(engine, req)
    out = Restore()
    if path is None or not path.exists():
        return out
    t0 = time.perf_counter()
    llm = engine.llm
    usable = len(prompt) - 1  # the last prompt token is always evaluated: the first sample needs its logits
    live = S.common_prefix([int(t) for t in llm.input_ids[:llm.n_tokens]], prompt[:usable])
    try:
        header = S.read_header(path)
        gain = S.common_prefix(header.tokens, prompt[:usable])
        if gain < live + MIN_GAIN:
            return out  # the live cache holds as much (this chat's next turn), or the chat changed early on
        problem = S.key_mismatch(header.key, state_key(engine))
        if problem:
            raise S.SavedKvError(problem)
        state = S.read_state(path, header)
        S.check_claims(state, header.tokens, llm.n_ctx(), llm.n_vocab())  # before llama.cpp sees it
        _load(llm, state, header.tokens)
    except S.SavedKvError as exc:
        out.note = f"saved KV of this chat not used: {exc}; prefilled instead"
        return out
    except Exception as exc:  # noqa: BLE001 - a saved state is an optimisation: the reply must not fail for it
        llm._ctx.kv_cache_clear()
        llm.reset()
        out.note = f"saved KV of this chat not used ({type(exc).__name__}: {exc}); prefilled instead"
        return out
    out.tokens, out.saved_rate = gain, header.prefill_ms_per_token
    out.ms = (time.perf_counter() - t0) * 1000.0
    return out


def _load(llm: Any, state: bytearray, tokens: list[int]) -> None:
    """Replace the cache with `state`; on any refusal the cache is left empty (a plain prefill follows)."""
    forget_prefill(llm)  # the restored cells are not the ones the kept prefill computed
    llm.reset()
    llm._ctx.kv_cache_clear()
    buf = (ctypes.c_uint8 * len(state)).from_buffer(state)
    read = llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(state), SEQ)
    mem = llama_cpp.llama_get_memory(llm._ctx.ctx)
    cells = llama_cpp.llama_memory_seq_pos_max(mem, SEQ) + 1 if mem is not None else 0
    if read != len(state) or cells != len(tokens):
        llm._ctx.kv_cache_clear()
        llm.reset()
        raise S.SavedKvError("llama.cpp could not load it (the state does not fit this cache)")
    llm.input_ids[:len(tokens)] = tokens
    llm.n_tokens = len(tokens)


def save(engine: Engine, req: P.Generate, shifted: bool) -> None:
    """After a reply: write the chat's cache as it is now (prompt and reply tokens but the last), within the
    budget; a state bigger than `kv_save_eager_mib` is only marked, and written when the chat is left
    (`save_unsaved`). Never raises: a state that cannot be saved only costs the next restore."""
    engine.unsaved = None
    path = enabled(engine, req)
    llm = engine.llm
    if path is None or llm is None or llm.n_tokens < MIN_SAVE or shifted:
        return  # a shifted cache (rolling overflow) is not the prefix its tokens say
    assert engine.config is not None
    try:
        size = llama_cpp.llama_state_seq_get_size(llm._ctx.ctx, SEQ)
    except Exception:  # noqa: BLE001
        return
    if size > engine.config.kv_save_eager_mib << 20:
        engine.unsaved = req
        return
    _write(engine, path)


def save_unsaved(engine: Engine) -> None:
    """Write the state a reply left unsaved (it was big), before the cache holds anything else."""
    req, engine.unsaved = engine.unsaved, None
    path = enabled(engine, req) if req is not None else None
    if path is not None and engine.llm is not None:
        _write(engine, path)


def _write(engine: Engine, path: Path) -> None:
    llm = engine.llm
    assert engine.config is not None
    budget = engine.config.kv_store_budget_mib << 20
    try:
        ctx = llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, SEQ)
        if size <= 0 or size > budget:
            path.unlink(missing_ok=True)  # what it holds is older than the chat now
            return
        buf = (ctypes.c_uint8 * size)()
        got = llama_cpp.llama_state_seq_get_data(ctx, buf, size, SEQ)
        tokens = [int(t) for t in llm.input_ids[:llm.n_tokens]]
        state = memoryview(buf)[:got]
        try:
            S.check_claims(state, tokens, llm.n_ctx(), llm.n_vocab())
        except S.SavedKvError as exc:  # a restore would refuse it: not worth the disk
            path.unlink(missing_ok=True)
            print(f"roofline engine: the chat's KV cache was not saved: {exc}", file=sys.stderr)
            return
        S.write_state(path, state_key(engine), tokens, state, engine._prefill_ms_per_token)
        S.enforce_budget(path.parent, budget, keep=path)
    except Exception as exc:  # noqa: BLE001 - saving is an optimisation: never let it fail the engine
        print(f"roofline engine: the chat's KV cache was not saved: {type(exc).__name__}: {exc}", file=sys.stderr)
