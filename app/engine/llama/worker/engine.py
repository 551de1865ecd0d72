"""`Engine`: the engine process's command loop and the state it owns (the loaded model, its template, the
KV cache's fill). Loading, generation and benchmarks are the functions in load.py, generate.py and bench.py;
the methods here are their names on the engine, so the batch engine (app.engine.llama.batch.engine) can override
one of them (`_construct`, `load`, `unload`, `dispatch`) and keep the rest.
"""

from __future__ import annotations

import ctypes
import queue
from collections import deque
from typing import Any

import llama_cpp

from app.core.chat.templates import ChatTemplate, ChatTemplateError
from app.engine import protocol as P
from app.engine.llama.devices import offload_devices_now
from app.engine.llama.worker import saved_kv
from app.engine.llama.worker.bench import run_bench
from app.engine.llama.worker.generate import Perf, prompt_tokens, read_perf, run_generation
from app.engine.llama.worker.load import construct, load_model
from app.engine.llama.worker.logs import LogCapture, rss
from app.engine.llama.worker.stream import send


class Engine:
    def __init__(self, inbox: queue.Queue[Any]) -> None:
        self.inbox = inbox
        self.pending: deque[Any] = deque()
        self.log = LogCapture()
        self.log.install()
        self.llm: Any = None
        self.loaded: P.Loaded | None = None
        self.template: ChatTemplate | None = None
        self.config: P.LoadConfig | None = None
        self.shutdown = False
        self._load_cancelled = False
        self._flash_used = False
        self._gguf: Any = None  # GGUFInfo of the loaded file (parsed in Python before llama.cpp sees it)
        self._piece_buf = ctypes.create_string_buffer(256)
        self._plain_ms_per_token: float | None = None  # last decode rate without prompt lookup
        self._prefill_ms_per_token: float | None = None  # last prefill rate of a long enough prompt (saved KV)
        self.unsaved: P.Generate | None = None  # the chat whose (big) KV state waits to be written (saved_kv)
        self.draft: Any = None  # DraftModel when the load asked for one
        self._warmup_ms = 0.0

    # --------------------------------------------------------------- command plumbing
    def next_command(self) -> Any:
        if self.pending:
            return self.pending.popleft()
        return self.inbox.get()

    def poll_interrupt(self, request_id: str) -> bool:
        """True when a Cancel for `request_id` (or a Shutdown) arrived; other commands wait their turn."""
        stop = False
        while True:
            try:
                cmd = self.inbox.get_nowait()
            except queue.Empty:
                return stop
            if isinstance(cmd, P.Cancel):
                if cmd.request_id == request_id:
                    stop = True
            elif isinstance(cmd, P.Shutdown):
                self.shutdown = True
                stop = True
            else:
                self.pending.append(cmd)

    def serve(self) -> None:
        while not self.shutdown:
            cmd = self.next_command()
            try:
                self.dispatch(cmd)
            except Exception as exc:  # noqa: BLE001 - report every failure as an event, keep serving
                rid = getattr(cmd, "request_id", None)
                send(P.Error(rid, "bad_request" if isinstance(exc, (ValueError, ChatTemplateError))
                             else "generation_failed", f"{type(exc).__name__}: {exc}"))

    def dispatch(self, cmd: Any) -> None:
        if self.unsaved is not None and not isinstance(cmd, (P.GetStats, P.Cancel)) and not (
                isinstance(cmd, P.Generate) and cmd.conversation_id == self.unsaved.conversation_id):
            saved_kv.save_unsaved(self)  # the cache is about to hold something else
        if isinstance(cmd, P.Shutdown):
            self.shutdown = True
        elif isinstance(cmd, P.Load):
            self.load(cmd.config)
        elif isinstance(cmd, P.Generate):
            self.generate(cmd)
        elif isinstance(cmd, P.Bench):
            self.bench(cmd)
        elif isinstance(cmd, P.GetStats):
            send(self.stats())
        elif isinstance(cmd, P.Unload):
            self.unload()
            send(self.stats())
        elif isinstance(cmd, P.Cancel):
            pass  # nothing running: a late cancel is harmless
        else:
            send(P.Error(None, "bad_request", f"unknown command {cmd!r}"))

    # --------------------------------------------------------------- load
    def unload(self) -> None:
        saved_kv.save_unsaved(self)
        if self.draft is not None:
            self.draft.close()
            self.draft = None
        if self.llm is not None:
            self.llm.close()
            self.llm = None
        self.loaded = None


    def load(self, cfg: P.LoadConfig) -> None:
        load_model(self, cfg)

    def _construct(self, cfg: P.LoadConfig) -> Any:
        return construct(self, cfg)

    # --------------------------------------------------------------- state queries
    def _perf(self) -> Perf:
        return read_perf(self.llm)

    def _piece(self, token: int, special: bool = False) -> bytes:
        buf = self._piece_buf
        n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, len(buf), 0, special)
        if n < 0:  # buffer too small: llama.cpp tells the size it needs
            self._piece_buf = buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def kv_cells_used(self) -> int:
        if self.llm is None:
            return 0
        mem = llama_cpp.llama_get_memory(self.llm._ctx.ctx)
        if mem is None:
            return 0
        pos_max = llama_cpp.llama_memory_seq_pos_max(mem, 0)
        return max(0, pos_max + 1)

    def kv_bytes_used(self, cells: int) -> int:
        """Bytes of KV actually holding tokens, per cache: a sliding-window cache smaller than n_ctx
        fills up (and then stays full) while the full-attention cache keeps growing."""
        if self.loaded is None or self.loaded.kv_cells_allocated == 0:
            return 0
        alloc = self.loaded.kv_bytes_allocated
        n_ctx = self.loaded.kv_cells_allocated
        caches = self._kv_caches()
        if caches and sum(c.bytes for c in caches) == alloc:
            return sum(c.bytes * min(cells, c.cells) // c.cells for c in caches if c.cells)
        return alloc * min(cells, n_ctx) // n_ctx  # layout unknown: assume one cache

    def _kv_caches(self) -> list[Any]:
        if self._gguf is None or self.loaded is None or self.config is None:
            return []
        from app.core.predict.memory import kv_caches

        try:
            return kv_caches(self._gguf, self.loaded.kv_cells_allocated, self.config.type_k,
                             self.config.type_v, self.config.n_ubatch, self.config.swa_full)
        except Exception:  # noqa: BLE001 - an estimator gap must not break a generation
            return []

    def stats(self) -> P.Stats:
        cells = self.kv_cells_used()
        return P.Stats(
            rss_bytes=rss(),
            kv_cells_used=cells,
            kv_cells_allocated=self.loaded.kv_cells_allocated if self.loaded else 0,
            kv_bytes_used=self.kv_bytes_used(cells),
            kv_bytes_allocated=self.loaded.kv_bytes_allocated if self.loaded else 0,
            loaded=self.loaded is not None,
            warmup_ms=self._warmup_ms if self.loaded else 0.0,
            devices=offload_devices_now(),
        )


    # --------------------------------------------------------------- generation
    def _prompt_tokens(self, req: P.Generate) -> tuple[list[int], int]:
        """Tokens of the request, and the number of chat messages dropped to fit the context."""
        return prompt_tokens(self, req)

    def generate(self, req: P.Generate) -> None:
        run_generation(self, req)

    # --------------------------------------------------------------- llama-bench style measurement
    def bench(self, req: P.Bench) -> None:
        run_bench(self, req)
