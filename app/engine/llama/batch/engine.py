"""The batch engine: N sequences in one llama.cpp context, advanced together (continuous batching).

Each slot is a llama.cpp seq_id of one context whose KV cache is unified (all slots draw cells from the
same n_ctx pool; a request may use up to n_ctx / n_slots of them, as in llama-server). Every step is one
llama_decode holding the next token of every decoding sequence plus a chunk of the prompts still being
prefilled, up to n_ubatch tokens in all, so a long prompt is spread over several steps instead of freezing
the others (chunked prefill). New requests take a free slot between steps. A cancelled request's cells are
freed at once; a finished one's stay as that slot's cache (as in llama-server) until the slot is needed by a
request they do not help (empty slots are taken first, then the least recently used cache is evicted). A
prompt that starts with a slot's cached tokens, or with the tokens of another running or cached slot
(shared through llama_memory_seq_cp, which in a unified cache only tags the cells), is prefilled only past
that prefix (the slots' bookkeeping: app.engine.llama.batch.slots). Sampling is per sequence with
app.core.sampling.chain on llama.cpp's logits rows in place.

It reuses the single-request engine for everything but generation (loading, templates, error wording):
`BatchEngine` is `app.engine.llama.worker.engine.Engine` with the context built for N sequences. llama.cpp is not
thread-safe: only the main thread touches it; a reader thread queues the commands.
"""

from __future__ import annotations

import queue
import random
import time
from collections import deque
from typing import Any

import llama_cpp

from app.core.chat.templates import render
from app.core.sampling.chain import PENALTY_LAST_N, Sampler, SamplerParams
from app.core.sampling.logprobs import logprob_entry
from app.engine import protocol as P
from app.engine.batch.messages import Accepted, BatchStats, DropCaches, Embed
from app.engine.llama.batch.embedding import Embedder
from app.engine.llama.batch.sequence import Sequence
from app.engine.llama.batch.slots import Slots
from app.engine.llama.batch.tokenizer import Prepared, PromptTokenizer, infill_prompt
from app.engine.llama.decoding import logits_row
from app.engine.llama.grammar_vocab import constraint_for
from app.engine.llama.worker.engine import Engine
from app.engine.llama.worker.stream import send, send_lines

STATS_INTERVAL_S = 0.5  # while busy, the batch's stats go out at most this often (and on every change)
MIN_PREFILL_PER_STEP = 16  # prompt tokens a step takes even when the decodes alone fill the ubatch


class BatchEngine(Slots, Engine):
    def __init__(self, inbox: queue.Queue[Any], n_slots: int) -> None:
        super().__init__(inbox)
        self.n_slots = max(1, int(n_slots))
        self.slots: list[Sequence | None] = [None] * self.n_slots
        self.slot_kv: list[list[int]] = [[] for _ in range(self.n_slots)]  # tokens each seq_id holds
        self.slot_used_at = [0.0] * self.n_slots
        self.waiting: deque[Sequence] = deque()
        self.by_id: dict[str, Sequence] = {}
        self.batch: Any = None
        self.n_ctx = 0
        self.n_ctx_slot = 0
        self.chunk = 512
        self.steps = 0
        self._stats_due = True
        self._stats_sent_at = 0.0
        self.tokenizing: dict[str, tuple[P.Generate, float]] = {}  # at the tokenizer thread (since when)
        self.cancelled_early: set[str] = set()  # of those, the ones whose client gave up meanwhile
        self.slot_salt: list[str] = [""] * self.n_slots  # whose prefix each slot's cache is (cache_salt)
        self.tokenizer = PromptTokenizer(inbox, self._prompt_bytes, self._tokenize_bytes,
                                         constrain=lambda req: constraint_for(self.llm, req.grammar),
                                         infill_of=lambda req: infill_prompt(self.llm, req))
        self.embedder = Embedder()  # /v1/embeddings' own context and thread, made at its first request

    # --------------------------------------------------------------- the context, built for N sequences
    def _construct(self, cfg: P.LoadConfig) -> Any:
        bindings = llama_cpp.llama_cpp
        original = bindings.llama_context_default_params

        def params_for_slots() -> Any:
            params = original()
            params.n_seq_max = self.n_slots
            params.kv_unified = True  # one pool of cells: a shared prefix is stored once
            return params

        # Llama() takes no n_seq_max; it builds its context params from this function: wrap it for one call.
        bindings.llama_context_default_params = params_for_slots
        try:
            return super()._construct(cfg)
        finally:
            bindings.llama_context_default_params = original

    def load(self, cfg: P.LoadConfig) -> None:
        with self.tokenizer.lock:  # no prompt is tokenized while the model changes
            self.tokenizer.forget()
            self._drop_all("The model was reloaded.")
            self.embedder.close("The model was reloaded.")
            super().load(cfg)
        if self.llm is None:
            return
        self.n_ctx = llama_cpp.llama_n_ctx(self.llm._ctx.ctx)
        self.n_ctx_slot = self.n_ctx // self.n_slots
        self.chunk = max(1, min(self.llm.context_params.n_ubatch, self.llm.n_batch))
        self.batch = llama_cpp.llama_batch_init(self.llm.n_batch, 0, 1)
        self.slot_kv = [[] for _ in range(self.n_slots)]
        self.slot_salt = [""] * self.n_slots
        self._stats_due = True
        self.tokenizer.learn_limits(self.llm._model.vocab, self.llm.n_vocab(), self.n_ctx_slot, self._limits_known)

    def _limits_known(self) -> None:  # the tokenizer thread: the stats carry max_prompt_bytes from now on
        self._stats_due = True

    def unload(self) -> None:
        with self.tokenizer.lock:
            self.tokenizer.forget()
            self._drop_all("The model was unloaded.")
            self.embedder.close("The model was unloaded.")
            if self.batch is not None:
                llama_cpp.llama_batch_free(self.batch)
                self.batch = None
            super().unload()

    @property
    def _mem(self) -> Any:
        return llama_cpp.llama_get_memory(self.llm._ctx.ctx)

    # --------------------------------------------------------------- commands
    def serve(self) -> None:
        try:
            self._serve()
        finally:
            self.tokenizer.stop()

    def _serve(self) -> None:
        while not self.shutdown:
            busy = bool(self.waiting) or any(s is not None for s in self.slots)
            self._drain(block=not busy)
            if self.shutdown:
                break
            try:
                self._admit()
                if any(s is not None for s in self.slots):
                    self._step()
            except Exception as exc:  # noqa: BLE001 - fail the requests in flight, keep serving
                self._drop_all(f"{type(exc).__name__}: {exc}")
            self._maybe_stats()

    def _drain(self, block: bool) -> None:
        while True:
            if self.pending:
                cmd = self.pending.popleft()
            else:
                try:
                    cmd = self.inbox.get(timeout=STATS_INTERVAL_S) if block else self.inbox.get_nowait()
                except queue.Empty:
                    return
            block = False
            try:
                self.dispatch(cmd)
            except Exception as exc:  # noqa: BLE001 - report every failure as an event, keep serving
                rid = getattr(cmd, "request_id", None)
                self.by_id.pop(rid or "", None)
                kind = "bad_request" if isinstance(exc, ValueError) else "generation_failed"
                send(P.Error(rid, kind, f"{exc}" if kind == "bad_request" else f"{type(exc).__name__}: {exc}"))
            if self.shutdown:
                return

    def dispatch(self, cmd: Any) -> None:
        if isinstance(cmd, P.Generate):
            self.submit(cmd)
        elif isinstance(cmd, Prepared):
            self.admit_prepared(cmd)
        elif isinstance(cmd, P.Cancel):
            self.cancel(cmd.request_id)
        elif isinstance(cmd, P.GetStats):
            send(self.batch_stats())
        elif isinstance(cmd, DropCaches):
            self.drop_caches()
        elif isinstance(cmd, Embed):
            arch = self.loaded.architecture if self.loaded else "general"
            self.embedder.submit(self.llm, cmd, self.n_ctx_slot, arch)
        elif isinstance(cmd, P.Bench):
            send(P.Error(cmd.request_id, "bad_request", "The batch engine does not run benchmarks."))
        else:
            super().dispatch(cmd)

    def _prompt_bytes(self, req: P.Generate) -> tuple[bytes, bool, bool]:
        """The prompt's UTF-8 text as llama.cpp tokenizes it, whether special tokens are parsed in it (the
        chat template's turn markers are; a raw prompt's text never is), and whether a BOS is added (not
        when the template wrote one). The tokenizer thread."""
        llm = self.llm
        if req.messages is None:
            return (req.prompt or "").encode("utf-8"), False, llm._model.add_bos_token()
        assert self.template is not None
        bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
        eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
        text = render(self.template, list(req.messages), bos_token=bos, eos_token=eos, tools=req.tools)
        text += req.assistant_prefix  # a forced tool call's opening (tool_choice required / named)
        add_bos = llm._model.add_bos_token() and not (bos and text.startswith(bos))
        return text.encode("utf-8"), True, add_bos

    def _tokenize_bytes(self, data: bytes, special: bool, add_bos: bool) -> list[int]:  # the tokenizer thread
        return list(self.llm.tokenize(data, add_bos=add_bos, special=special))

    def _over(self, n: str) -> str:
        return (f"The prompt is {n} but one request may use at most {self.n_ctx_slot} tokens (a context of "
                f"{self.n_ctx} shared by {self.n_slots} slots). Shorten the prompt, or start the server with "
                "a larger --ctx.")

    def submit(self, req: P.Generate) -> None:
        """Refuse what cannot fit at once; hand the rest to the tokenizer thread (see `admit_prepared`)."""
        rid = req.request_id
        if self.llm is None:
            send(P.Error(rid, "bad_request", "No model is loaded."))
            return
        if rid in self.by_id or rid in self.tokenizing:
            send(P.Error(rid, "bad_request", f"Request id {rid!r} is already in use."))
            return
        cap = self.tokenizer.max_prompt_bytes
        size = req.prompt_bytes()
        if cap and size > cap:  # more bytes than the slot's tokens can spell: refused before tokenizing
            send(P.Error(rid, "bad_request", self._over(f"{size} bytes, more than {self.n_ctx_slot} tokens,")))
            return
        self.tokenizing[rid] = (req, time.monotonic())
        self.tokenizer.submit(req, self.n_ctx_slot)

    def admit_prepared(self, prepared: Prepared) -> None:
        req = prepared.request
        rid = req.request_id
        entry = self.tokenizing.get(rid)
        if entry is None or entry[0] is not req:
            return  # dropped meanwhile (the model was reloaded)
        del self.tokenizing[rid]
        if rid in self.cancelled_early:
            self.cancelled_early.discard(rid)
            send(P.Done(rid, "", "cancelled", {}))
            return
        if prepared.tokens is None:
            reason = self._over(f"over {self.n_ctx_slot} tokens") if prepared.over else prepared.error
            send(P.Error(rid, "bad_request", reason or "The prompt could not be tokenized."))
            return
        self._accept(req, prepared.tokens, entry[1], prepared.constraint)

    def _accept(self, req: P.Generate, tokens: list[int], t_submit: float, constraint: Any = None) -> None:
        rid = req.request_id
        if len(tokens) >= self.n_ctx_slot:
            send(P.Error(rid, "bad_request", self._over(f"{len(tokens)} tokens")))
            return
        s = req.sampling
        seed = s.seed if s.seed is not None and s.seed >= 0 else random.randint(0, 2**31 - 1)
        # OpenAI's penalties count every token of the reply so far, not llama.cpp's last 64
        window = -1 if s.frequency_penalty or s.presence_penalty else PENALTY_LAST_N
        sampler = Sampler(SamplerParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p,
                                        repeat_penalty=s.repeat_penalty, frequency_penalty=s.frequency_penalty,
                                        presence_penalty=s.presence_penalty, penalty_last_n=window),
                          self.llm.n_vocab(), seed, constraint=constraint, logprobs=req.logprobs)
        seq = Sequence(request_id=rid, prompt=tokens, sampler=sampler,
                       max_tokens=max(1, min(s.max_tokens, self.n_ctx_slot - len(tokens))),
                       requested_max_tokens=s.max_tokens, stop=[x for x in s.stop if x],
                       ignore_eos=s.ignore_eos, t_submit=t_submit, salt=req.cache_salt,
                       special_text=req.special_text)
        self.by_id[rid] = seq
        self.waiting.append(seq)
        self._stats_due = True
        send(Accepted(rid, len(tokens)))

    def cancel(self, request_id: str) -> None:
        if request_id in self.tokenizing:  # answered (Done, cancelled) when its tokens come back
            self.cancelled_early.add(request_id)
            return
        if self.embedder.cancel(request_id):
            return
        seq = self.by_id.get(request_id)
        if seq is None:
            return  # finished already: a late cancel is harmless
        if seq.slot < 0:
            self.waiting.remove(seq)
        self._finish(seq, "cancelled")

    # --------------------------------------------------------------- one step
    def _step(self) -> None:
        batch, n = self.batch, 0
        outputs: list[tuple[Sequence, int]] = []
        fed: list[tuple[Sequence, list[int]]] = []
        running = [s for s in self.slots if s is not None]

        def put(token: int, pos: int, slot: int, logits: bool) -> None:
            nonlocal n
            batch.token[n] = token
            batch.pos[n] = pos
            batch.n_seq_id[n] = 1
            batch.seq_id[n][0] = slot
            batch.logits[n] = logits
            n += 1

        for seq in running:
            if not seq.prefilling and seq.pending is not None:
                put(seq.pending, len(self.slot_kv[seq.slot]), seq.slot, True)
                outputs.append((seq, n - 1))
                fed.append((seq, [seq.pending]))
        budget = min(max(self.chunk - n, MIN_PREFILL_PER_STEP), self.llm.n_batch - n)
        for seq in sorted((s for s in running if s.prefilling), key=lambda s: s.t_admit):
            if budget <= 0:
                break
            start = seq.n_prefilled
            chunk = seq.prompt[start:start + budget]
            for j, token in enumerate(chunk):
                put(token, start + j, seq.slot, start + j == len(seq.prompt) - 1)
            if start + len(chunk) == len(seq.prompt):
                outputs.append((seq, n - 1))
            fed.append((seq, chunk))
            budget -= len(chunk)
        if n == 0:
            return
        batch.n_tokens = n
        rc = llama_cpp.llama_decode(self.llm._ctx.ctx, batch)
        self.steps += 1
        if rc != 0:
            reason = "no free KV cells" if rc == 1 else f"llama_decode returned {rc}"
            for seq, _ in fed:
                self._finish(seq, "error")
                send(P.Error(seq.request_id, "generation_failed", f"Decoding failed: {reason}."))
            return
        for seq, tokens in fed:
            self.slot_kv[seq.slot].extend(tokens)
            if seq.prefilling:
                seq.n_prefilled += len(tokens)
                seq.prefill_steps += 1
            seq.pending = None
        now = time.monotonic()
        vocab = self.llm._model.vocab
        lines: list[str] = []
        for seq, idx in outputs:
            token = seq.sampler.sample(logits_row(self.llm, idx))
            eog = bool(llama_cpp.llama_vocab_is_eog(vocab, token))
            emitted = seq.emitted
            text = seq.accept(token, eog, b"" if eog else self._piece(token, seq.special_text), now)
            if seq.emitted > emitted:  # one Token per reply token, its text maybe empty (see Sequence)
                entry = self._logprob(seq)
                lines.append(P.encode(P.Token(seq.request_id, text, seq.emitted - 1, now,
                                              logprobs=None if entry is None else [entry])))
            if seq.finish is not None:
                if lines:
                    send_lines(lines)
                    lines = []
                self._finish(seq)
        if lines:
            send_lines(lines)

    def _logprob(self, seq: Sequence) -> dict[str, Any] | None:
        """The last drawn token's log-probabilities, in OpenAI's form, kept for Done too (None: not asked)."""
        drawn = seq.sampler.logprobs
        if seq.sampler.logprobs_top is None or not drawn:
            return None
        entry = logprob_entry(drawn[-1], self._piece)
        seq.logprobs.append(entry)
        return entry

    # --------------------------------------------------------------- stats
    def batch_stats(self) -> BatchStats:
        running = [s for s in self.slots if s is not None]
        return BatchStats(
            running=len(running), waiting=len(self.waiting), n_slots=self.n_slots, n_ctx=self.n_ctx,
            n_ctx_slot=self.n_ctx_slot, kv_tokens=sum(len(kv) for kv in self.slot_kv),
            kv_tokens_running=sum(len(self.slot_kv[s.slot]) for s in running), steps=self.steps,
            t=time.monotonic(), max_prompt_bytes=self.tokenizer.max_prompt_bytes)

    def kv_cells_used(self) -> int:
        return sum(len(kv) for kv in self.slot_kv)

    def _maybe_stats(self) -> None:
        now = time.monotonic()
        busy = any(s is not None for s in self.slots)
        if self._stats_due or (busy and now - self._stats_sent_at >= STATS_INTERVAL_S):
            self._stats_due = False
            self._stats_sent_at = now
            send(self.batch_stats())
