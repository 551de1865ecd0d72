"""The engine process: owns llama.cpp (the only module that imports `llama_cpp`) and serves the protocol.

Run as `python -m app.engine.worker`. Commands arrive as JSON lines on stdin, events leave as JSON lines on
a private copy of stdout; file descriptor 1 itself is pointed at stderr so that anything native code prints
can never corrupt the protocol stream. One thread reads stdin into a queue, so a `cancel` is seen between
two tokens while the main thread generates. llama.cpp is not thread-safe: only the main thread touches it.
"""

from __future__ import annotations

import codecs
import ctypes
import os
import queue
import random
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import IO, Any

from app.core.chat_templates import ChatTemplate, ChatTemplateError, render, select_template
from app.core.metrics import PhaseMetrics
from app.core.sampling import Sampler, SamplerParams
from app.engine import protocol as P
from app.engine.context_overflow import context_limit, fit_prompt
from app.engine.decoding import plain_tokens
from app.engine.draft_model import DraftModelLookup, open_draft
from app.engine.live import prefilled_event, warm_up
from app.engine.reasoning_stream import ReasoningStream, prompt_opens_thinking
from app.engine.speculative import PromptLookup

# The protocol stream: the real stdout, which llama.cpp's own prints can no longer reach (see below).
_out: IO[str]


def _setup_streams() -> None:
    global _out
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    _out = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
    sys.stdout = sys.stderr


_send_lock = threading.Lock()


def send(event: Any) -> None:
    send_lines([P.encode(event)])


def send_lines(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    with _send_lock:
        _out.write(text)
        _out.flush()


BURST_MS = 25  # the default gap between token bursts; a request may ask for another (up to MAX_BURST_MS)
MAX_BURST_MS = 250


def burst_interval_s(requested_ms: int | None) -> float:
    """Seconds between token bursts for a request: its own wish within [0, MAX_BURST_MS], else BURST_MS."""
    ms = BURST_MS if requested_ms is None else min(max(int(requested_ms), 0), MAX_BURST_MS)
    return ms / 1000.0


class TokenOut:
    """Token events leave in bursts: one pipe write, and one wake-up of the app's reader thread, per
    `interval_s` instead of per token. On a 2-core machine every wake-up of the app takes a core from
    llama.cpp mid-token. The first token leaves at once (it is the user's TTFT); every token keeps its own
    timestamp, so ITL is exact; the view batches to ≤ 30 updates/s anyway."""

    def __init__(self, interval_s: float = BURST_MS / 1000.0) -> None:
        self.interval_s = interval_s
        self.lines: list[str] = []
        self.sent_at: float | None = None

    def add(self, event: P.Token) -> None:
        self.lines.append(P.encode(event))
        if self.sent_at is None or event.t - self.sent_at >= self.interval_s:
            self.flush(event.t)

    def flush(self, now: float | None = None) -> None:
        if self.lines:
            send_lines(self.lines)
            self.lines = []
            self.sent_at = time.monotonic() if now is None else now


import llama_cpp

from app.engine.backends import cpu_backend, load_backends  # noqa: E402

_KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0,
             "f32": llama_cpp.GGML_TYPE_F32}


# ------------------------------------------------------------------------------------------ llama.cpp logs
class LogCapture:
    """Collects llama.cpp's log lines (the ground truth for buffer sizes) and keeps a tail for errors."""

    BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|compute|output)\s+buffer size\s*=\s*([\d.]+)\s*MiB")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._partial = ""
        self.tail: deque[str] = deque(maxlen=30)
        self.echo = os.environ.get("ROOFLINE_ENGINE_LOG") == "1"
        self.callback = llama_cpp.llama_log_callback(self._on_log)  # keep a reference: ctypes callback

    def _on_log(self, level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        self._partial += text.decode("utf-8", errors="replace")
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self.lines.append(line)
            self.tail.append(line)
            if self.echo or level in (2, 3):  # warnings and errors always reach stderr (the client keeps a tail)
                print(line, file=sys.stderr, flush=True)

    def install(self) -> None:
        llama_cpp.llama_log_set(self.callback, ctypes.c_void_p(0))

    def mark(self) -> int:
        return len(self.lines)

    def buffers_since(self, mark: int) -> dict[str, float]:
        """{'model:CPU_Mapped': 247.81, 'KV:CPU': 72.0, 'compute:CPU': 514.5, ...} summed per kind:device."""
        out: dict[str, float] = {}
        for line in self.lines[mark:]:
            m = self.BUFFER_RE.search(line)
            if m:
                device, kind, mib = m.group(1), m.group(2), float(m.group(3))
                key = f"{kind}:{device}"
                out[key] = round(out.get(key, 0.0) + mib, 3)
        return out


def _rss() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - psutil missing or restricted: report 0, never fail a generation
        return 0


# ------------------------------------------------------------------------------------------ the engine
@dataclass
class _Perf:
    t_p_eval_ms: float
    t_eval_ms: float
    n_p_eval: int
    n_eval: int


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
        if self.draft is not None:
            self.draft.close()
            self.draft = None
        if self.llm is not None:
            self.llm.close()
            self.llm = None
        self.loaded = None

    def load(self, cfg: P.LoadConfig) -> None:
        self.unload()
        if not os.path.isfile(cfg.model_path):
            send(P.Error(None, "load_failed", f"Model file not found: {cfg.model_path}"))
            return
        problem, self._gguf = _check_gguf_header(cfg.model_path)
        if problem:
            send(P.Error(None, "load_failed", problem))
            return
        for name in (cfg.type_k, cfg.type_v):
            if name not in _KV_TYPES:
                send(P.Error(None, "load_failed", f"Unknown KV cache type {name!r}; use one of {sorted(_KV_TYPES)}"))
                return
        mark = self.log.mark()
        send(P.Progress("loading", 0.0))
        t0 = time.perf_counter()
        try:
            self.llm = self._construct(cfg)
        except Exception as exc:  # noqa: BLE001 - llama.cpp reports a bad file as a generic failure
            reason = _explain_load_failure(self.log.lines[mark:], exc, self._load_cancelled)
            self.llm = None
            send(P.Error(None, "load_failed", reason))
            return
        load_ms = (time.perf_counter() - t0) * 1000.0
        self.config = cfg
        llm = self.llm
        meta = {k: str(v) for k, v in llm.metadata.items() if len(str(v)) < 4096 or k == "tokenizer.chat_template"}
        arch = meta.get("general.architecture", "unknown")
        self.template = select_template(arch, meta.get("tokenizer.chat_template"), cfg.chat_template)
        buffers = self.log.buffers_since(mark)
        kv_bytes = int(sum(v for k, v in buffers.items() if k.startswith("KV:")) * 1024 * 1024)
        ctx = llm._ctx.ctx
        n_threads = llm.context_params.n_threads
        self.loaded = P.Loaded(
            model_path=cfg.model_path,
            load_ms=load_ms,
            n_ctx=llama_cpp.llama_n_ctx(ctx),
            n_ctx_train=llm._model.n_ctx_train(),
            n_vocab=llm.n_vocab(),
            n_params=llm._model.n_params(),
            model_size=llm._model.size(),
            architecture=arch,
            model_desc=llm._model.desc(),
            chat_template_name=self.template.name,
            chat_template_source=self.template.source,
            n_gpu_layers=cfg.n_gpu_layers if llama_cpp.llama_supports_gpu_offload() else 0,
            type_k=cfg.type_k,
            type_v=cfg.type_v,
            flash_attn=self._flash_used,
            swa_full=cfg.swa_full,
            buffers_mib=buffers,
            kv_bytes_allocated=kv_bytes,
            kv_cells_allocated=llama_cpp.llama_n_ctx(ctx),
            n_threads=n_threads,
            n_threads_batch=llm.context_params.n_threads_batch,
            rss_bytes=_rss(),
            metadata={k: v for k, v in meta.items() if not k.startswith("tokenizer.ggml.")},
        )
        if cfg.draft_model:
            self.draft, problem = open_draft(cfg.model_path, cfg.draft_model, llm, cfg.draft_max)
            if problem:
                self.unload()
                send(P.Error(None, "load_failed", problem))
                return
        send(P.Progress("loading", 1.0))
        send(self.loaded)
        # after Loaded, so the window is not kept waiting; a request sent meanwhile waits its turn
        self._warmup_ms = warm_up(llm) if cfg.warmup else 0.0

    def _construct(self, cfg: P.LoadConfig) -> Any:
        self._load_cancelled = False
        last = [-1.0]

        def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
            if fraction - last[0] >= 0.02 or fraction >= 1.0:
                last[0] = fraction
                send(P.Progress("loading", float(fraction)))
            if self.poll_interrupt("load"):
                self._load_cancelled = True
                return False  # llama.cpp aborts the load
            return True

        callback = llama_cpp.llama_progress_callback(on_progress)
        # Llama() calls it through the ctypes module (`llama_cpp.llama_cpp`), not the package namespace.
        bindings = llama_cpp.llama_cpp
        original = bindings.llama_model_default_params

        def params_with_progress() -> Any:
            params = original()
            params.progress_callback = callback
            return params

        # Llama() offers no progress hook; it builds its params from this function, so wrap it for one call.
        bindings.llama_model_default_params = params_with_progress
        try:
            flash: Any = cfg.flash_attn
            if cfg.type_v != "f16" and flash is None:
                flash = True  # a quantized V cache needs flash attention in llama.cpp
            llm = llama_cpp.Llama(
                model_path=cfg.model_path,
                n_ctx=cfg.n_ctx,
                n_threads=cfg.n_threads or default_threads(),
                n_threads_batch=cfg.n_threads_batch or cfg.n_threads or default_threads(logical=True),
                n_gpu_layers=cfg.n_gpu_layers,
                n_batch=cfg.n_batch,
                n_ubatch=cfg.n_ubatch,
                type_k=_KV_TYPES[cfg.type_k],
                type_v=_KV_TYPES[cfg.type_v],
                flash_attn=bool(flash),
                swa_full=cfg.swa_full,
                seed=cfg.seed if cfg.seed >= 0 else llama_cpp.LLAMA_DEFAULT_SEED,
                use_mmap=cfg.use_mmap,
                verbose=False,
            )
        finally:
            bindings.llama_model_default_params = original
        self._flash_used = bool(flash)
        return llm

    # --------------------------------------------------------------- state queries
    def _perf(self) -> _Perf:
        d = llama_cpp.llama_perf_context(self.llm._ctx.ctx)
        # llama.cpp reports max(1, n) for both counts, so a count of 1 with no time spent is really 0.
        n_p = d.n_p_eval if d.t_p_eval_ms > 0 else 0
        n_e = d.n_eval if d.t_eval_ms > 0 else 0
        return _Perf(d.t_p_eval_ms, d.t_eval_ms, n_p, n_e)

    def _piece(self, token: int) -> bytes:
        buf = self._piece_buf
        n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, len(buf), 0, False)
        if n < 0:  # buffer too small: llama.cpp tells the size it needs
            self._piece_buf = buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, len(buf), 0, False)
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
        from app.core.memory import kv_caches

        try:
            return kv_caches(self._gguf, self.loaded.kv_cells_allocated, self.config.type_k,
                             self.config.type_v, self.config.n_ubatch, self.config.swa_full)
        except Exception:  # noqa: BLE001 - an estimator gap must not break a generation
            return []

    def stats(self) -> P.Stats:
        cells = self.kv_cells_used()
        return P.Stats(
            rss_bytes=_rss(),
            kv_cells_used=cells,
            kv_cells_allocated=self.loaded.kv_cells_allocated if self.loaded else 0,
            kv_bytes_used=self.kv_bytes_used(cells),
            kv_bytes_allocated=self.loaded.kv_bytes_allocated if self.loaded else 0,
            loaded=self.loaded is not None,
            warmup_ms=self._warmup_ms if self.loaded else 0.0,
        )

    # --------------------------------------------------------------- generation
    def _prompt_tokens(self, req: P.Generate) -> tuple[list[int], int]:
        """Tokens of the request; drops the oldest chat turns when the prompt would overflow the context.

        Returns (tokens, number of messages dropped)."""
        llm = self.llm
        n_ctx = context_limit(llm)  # the context asked for (llama.cpp pads small ones)
        room = n_ctx - max(1, min(req.sampling.max_tokens, n_ctx // 2))
        if req.messages is None:
            text = req.prompt or ""
            tokens = llm.tokenize(text.encode("utf-8"), add_bos=llm._model.add_bos_token(), special=False)
            if len(tokens) >= n_ctx and req.context_overflow == "stop":
                raise ValueError(f"The prompt is {len(tokens)} tokens but the context holds {n_ctx}. "
                                 "Shorten the prompt or load the model with a larger context.")
            return tokens, 0
        assert self.template is not None
        messages = list(req.messages)
        dropped = 0
        while True:
            bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
            eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
            text = render(self.template, messages, bos_token=bos, eos_token=eos)
            add_bos = llm._model.add_bos_token() and not (bos and text.startswith(bos))
            tokens = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
            if len(tokens) <= room:
                return tokens, dropped
            # Keep the system prompt and the newest user turn; drop the oldest other turn.
            droppable = [i for i, m in enumerate(messages[:-1]) if m["role"] != "system"]
            if not droppable:
                if len(tokens) >= n_ctx and req.context_overflow == "stop":
                    raise ValueError(f"The message is {len(tokens)} tokens but the context holds {n_ctx}. "
                                     "Shorten it or load the model with a larger context.")
                return tokens, dropped
            del messages[droppable[0]]
            dropped += 1

    def generate(self, req: P.Generate) -> None:
        if self.llm is None:
            send(P.Error(req.request_id, "bad_request", "No model is loaded."))
            return
        t_request = time.monotonic()
        llm = self.llm
        s = req.sampling
        tokens, dropped = self._prompt_tokens(req)
        tokens, overflow = fit_prompt(llm, req, tokens, self.template)
        max_tokens = overflow.max_tokens(s.max_tokens, len(tokens))
        seed = s.seed if s.seed is not None and s.seed >= 0 else random.randint(0, 2**31 - 1)
        sampler = Sampler(SamplerParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p,
                                        repeat_penalty=s.repeat_penalty), llm.n_vocab(), seed)
        vocab = llm._model.vocab
        metrics = PhaseMetrics(prompt_tokens=len(tokens), load_ms=self.loaded.load_ms if self.loaded else 0.0)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        split = req.messages is not None and req.split_reasoning
        reply = ReasoningStream(req.request_id, t_request, split, split and prompt_opens_thinking(llm, tokens))
        held = ""  # text held back while it could still be the start of a stop string
        stop_len = max((len(x) for x in s.stop), default=0)
        finish = "length"
        times: list[float] = []
        # Counters accumulate across calls; start each generation from zero (and still take deltas).
        llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
        perf0 = self._perf()
        perf_first: _Perf | None = None
        generated = 0
        token_out = TokenOut(burst_interval_s(req.stream_interval_ms))
        lookup: PromptLookup | None = None
        if overflow.rolling:  # before prompt lookup, which cannot shift the cache
            gen = overflow.tokens(llm, tokens, sampler)
        elif req.prompt_lookup or self.draft is not None:
            lookup = PromptLookup(llm, sampler, plain_ms_hint=self._plain_ms_per_token) if self.draft is None \
                else DraftModelLookup(llm, sampler, self.draft, plain_ms_hint=self._plain_ms_per_token)
            gen = lookup.generate(tokens)
        else:
            gen = plain_tokens(llm, tokens, sampler)
        try:
            for token in gen:
                now = time.monotonic()
                generated += 1
                if perf_first is None:
                    perf_first = self._perf()
                    metrics.ttft_ms = (now - t_request) * 1000.0
                    send(prefilled_event(self, req.request_id, len(tokens), perf0, perf_first, metrics.ttft_ms))
                if llama_cpp.llama_vocab_is_eog(vocab, token) and not s.ignore_eos:
                    finish = "stop"
                    break
                piece = decoder.decode(self._piece(token))
                times.append(now)
                if piece:
                    held += piece
                    hit = _find_stop(held, s.stop)
                    if hit is not None:
                        held = held[:hit]
                        finish = "stop"
                    cut = len(held) if finish == "stop" else max(0, len(held) - (stop_len - 1 if stop_len else 0))
                    out, held = held[:cut], held[cut:]
                    event = reply.emit(out, now, generated) if out else None
                    if event is not None:
                        token_out.add(event)
                    if finish == "stop":
                        break
                if generated >= max_tokens:
                    finish = "length" if generated >= s.max_tokens else "context_full"
                    break
                if self.poll_interrupt(req.request_id):
                    finish = "cancelled"
                    break
        finally:
            gen.close()
            token_out.flush()  # whatever was streamed reaches the app, even if an error follows
        for event in (reply.emit(held, time.monotonic(), generated) if held and finish != "stop" else None,
                      reply.finish(time.monotonic())):
            if event is not None:
                token_out.add(event)
        token_out.flush()
        t_end = time.monotonic()
        perf1 = self._perf()
        first = perf_first or perf1
        # Phases split at the first token: everything evaluated before it was prompt (even a lone
        # last prompt token that llama.cpp counts as a "generation" call), everything after is decode.
        metrics.prefill_tokens = (first.n_p_eval - perf0.n_p_eval) + (first.n_eval - perf0.n_eval)
        metrics.prefill_ms = (first.t_p_eval_ms - perf0.t_p_eval_ms) + (first.t_eval_ms - perf0.t_eval_ms)
        metrics.reused_tokens = max(0, len(tokens) - metrics.prefill_tokens)
        metrics.decode_tokens = perf1.n_eval - first.n_eval
        metrics.decode_ms = perf1.t_eval_ms - first.t_eval_ms
        if lookup is not None:
            # Draft batches count as prompt batches in llama.cpp: decode is every call after the first
            # token, and its rate is tokens produced per second of those calls (the effective speed).
            metrics.decode_tokens = max(0, generated - 1)
            metrics.decode_ms += perf1.t_p_eval_ms - first.t_p_eval_ms
            metrics.draft_tokens = lookup.drafted
            metrics.draft_accepted = lookup.accepted
        metrics.generated_tokens = generated
        metrics.itl_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:])]
        metrics.decode_wall_ms = (times[-1] - times[0]) * 1000.0 if len(times) > 1 else 0.0
        metrics.total_ms = (t_end - t_request) * 1000.0
        st = self.stats()
        metrics.kv_cells_used = st.kv_cells_used
        metrics.kv_cells_allocated = st.kv_cells_allocated
        metrics.kv_bytes_used = st.kv_bytes_used
        metrics.kv_bytes_allocated = st.kv_bytes_allocated
        metrics.rss_bytes = st.rss_bytes
        data = metrics.to_dict()
        data["messages_dropped"] = dropped
        data["chat_template"] = self.template.name if self.template and req.messages is not None else "none"
        data["token_times"] = times
        data.update(reply.metrics())
        data.update(overflow.metrics())
        if lookup is not None:
            data["lookup_batch_steps"] = lookup.batch_steps
            data["lookup_plain_steps"] = lookup.plain_steps
            data["lookup_speedup"] = lookup.speedup(self._plain_ms_per_token)
            data["lookup_pauses"] = lookup.pauses  # times drafting stopped because it was losing
        elif metrics.decode_tokens > 0:
            self._plain_ms_per_token = metrics.decode_ms / metrics.decode_tokens  # reference for lookup runs
        send(P.Done(req.request_id, reply.answer, finish, data, reasoning=reply.reasoning))

    # --------------------------------------------------------------- llama-bench style measurement
    def bench(self, req: P.Bench) -> None:
        if self.llm is None:
            send(P.Error(req.request_id, "bad_request", "No model is loaded."))
            return
        llm = self.llm
        ctx = llm._ctx.ctx
        n_vocab = llm.n_vocab()
        n_batch = llm.n_batch
        rng = random.Random(1234)
        mem = llama_cpp.llama_get_memory(ctx)

        def clear() -> None:
            llama_cpp.llama_memory_clear(mem, True)

        def decode_batch(toks: list[int], pos: int) -> None:
            for i in range(0, len(toks), n_batch):
                chunk = toks[i:i + n_batch]
                llm._batch.set_batch(batch=chunk, n_past=pos + i, logits_all=False)
                if llama_cpp.llama_decode(ctx, llm._batch.batch) != 0:
                    raise RuntimeError("llama_decode failed (context too small for this test?)")
            llama_cpp.llama_synchronize(ctx)

        def one_run() -> int:
            clear()
            if req.n_depth:
                decode_batch([rng.randrange(n_vocab) for _ in range(req.n_depth)], 0)
            t0 = time.perf_counter_ns()
            if req.n_prompt:
                decode_batch([rng.randrange(n_vocab) for _ in range(req.n_prompt)], req.n_depth)
            if req.n_gen:
                pos = req.n_depth + req.n_prompt
                tok = llm.token_bos() if llm._model.add_bos_token() else rng.randrange(n_vocab)
                for i in range(req.n_gen):
                    llm._batch.set_batch(batch=[tok], n_past=pos + i, logits_all=False)
                    if llama_cpp.llama_decode(ctx, llm._batch.batch) != 0:
                        raise RuntimeError("llama_decode failed during generation test")
                    llama_cpp.llama_synchronize(ctx)
                    tok = rng.randrange(n_vocab)
            return time.perf_counter_ns() - t0

        samples: list[int] = []
        try:
            if req.warmup:
                one_run()
            for _ in range(req.repetitions):
                if self.poll_interrupt(req.request_id):
                    send(P.Error(req.request_id, "cancelled", "Benchmark cancelled."))
                    return
                samples.append(one_run())
        finally:
            clear()
            llm.n_tokens = 0  # the chat's cached prefix is gone
        assert self.loaded is not None
        send(P.BenchResult(
            request_id=req.request_id, n_prompt=req.n_prompt, n_gen=req.n_gen, n_depth=req.n_depth,
            samples_ns=samples, n_threads=self.loaded.n_threads,
            model_info={
                "model_filename": self.loaded.model_path, "model_type": self.loaded.model_desc,
                "model_size": self.loaded.model_size, "model_n_params": self.loaded.n_params,
                "n_batch": llm.n_batch, "n_ubatch": llm.context_params.n_ubatch,
                "type_k": self.loaded.type_k, "type_v": self.loaded.type_v,
                "n_gpu_layers": self.loaded.n_gpu_layers, "flash_attn": bool(self.loaded.flash_attn),
                "n_threads": self.loaded.n_threads,
            },
        ))


def default_threads(logical: bool = False) -> int:
    """llama.cpp's own default: physical cores for decode, all cores for batches.

    (llama-cpp-python would use cpu_count // 2, which is 1 on a 2-core laptop VM.)"""
    try:
        import psutil

        n = psutil.cpu_count(logical=logical)
    except Exception:  # noqa: BLE001
        n = None
    return max(1, n or os.cpu_count() or 1)


def _find_stop(text: str, stops: list[str]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None


def _check_gguf_header(path: str) -> tuple[str | None, Any]:
    """Pre-flight in Python before native code sees the file: bad magic, a header cut short, absurd
    counts, tensors past the end of the file (a truncated download) all get a plain-words reason.
    Returns (problem or None, GGUFInfo or None)."""
    from app.core.gguf_info import GGUFError, inspect_gguf

    try:
        return None, inspect_gguf(path)
    except GGUFError as exc:
        return f"{os.path.basename(path)} is not a usable GGUF model: {exc}", None
    except OSError as exc:
        return f"Cannot read the model file: {exc}", None


def _explain_load_failure(log_lines: list[str], exc: Exception, cancelled: bool) -> str:
    if cancelled:
        return "Loading was cancelled."
    errors = [ln.strip() for ln in log_lines if re.search(r"error|failed|invalid|corrupt|truncat", ln, re.IGNORECASE)]
    detail = "; ".join(errors[-3:]) if errors else str(exc)
    return f"llama.cpp could not load this model: {detail}"


def _stdin_reader(inbox: queue.Queue[Any]) -> None:
    for raw in sys.stdin.buffer:
        try:
            inbox.put(P.decode(raw))
        except P.ProtocolError as exc:
            send(P.Error(None, "protocol", str(exc)))
    inbox.put(P.Shutdown())  # the app closed our stdin (or died): stop instead of lingering as an orphan


def _watch_parent() -> None:
    """Exit when the app that started us is gone, even mid-prefill or mid-benchmark (when stdin EOF is not
    noticed until the current llama.cpp call returns): an orphan engine would hold GBs of memory."""
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def lower_priority(value: str | None) -> None:
    """Run below normal CPU priority when asked (the desktop app asks: ROOFLINE_ENGINE_NICE=5).

    On a machine with few cores llama.cpp's threads occupy every core; at equal priority the window waits
    its turn behind them. A little lower priority lets the window, and the rest of the desktop, run first
    when they need to; they need little, so decode speed is unchanged (on 2 cores: event-loop p99 stall
    4.6 -> 2.4 ms; scripts/bench_gui, docs/gui.md)."""
    try:
        n = int(value or 0)
    except ValueError:
        return
    if n <= 0:
        return
    try:
        if hasattr(os, "nice"):
            os.nice(n)
        else:  # Windows
            import psutil

            psutil.Process().nice(psutil.BELOW_NORMAL_PRIORITY_CLASS)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a priority we cannot lower is not worth failing the engine for
        pass


def announce_ready() -> None:
    """Register ggml's loadable backends (a portable build's CPU code is a module in llama_cpp/lib that ggml
    would not find by itself), then tell the parent this process is ready and what it runs on."""
    load_backends()
    send(P.Ready(pid=os.getpid(), llama_cpp_version=llama_cpp.__version__, cpu_backend=cpu_backend().describe(),
                 system_info=llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
                 gpu_offload=bool(llama_cpp.llama_supports_gpu_offload())))


def main() -> int:
    _setup_streams()
    lower_priority(os.environ.get("ROOFLINE_ENGINE_NICE"))
    threading.Thread(target=_watch_parent, name="parent-watch", daemon=True).start()
    inbox: queue.Queue[Any] = queue.Queue()
    engine = Engine(inbox)
    threading.Thread(target=_stdin_reader, args=(inbox,), name="stdin", daemon=True).start()
    announce_ready()
    engine.serve()
    engine.unload()
    return 0


if __name__ == "__main__":
    sys.exit(main())
