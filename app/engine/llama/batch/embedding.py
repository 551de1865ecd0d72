"""Embeddings in the batch engine: a llama.cpp context of their own beside the generation context, on a
thread of their own.

A model embeds when its GGUF declares a pooling type (`<arch>.pooling_type`: mean, CLS or last token), as
embedding models do; a generation model declares none, so it has no one vector per text and is refused,
as llama-server refuses pooling "none" on /v1/embeddings (a reranker's "rank" pooling is refused too).

The generation context cannot serve them: llama.cpp fixes pooling when a context is made, and switching
the shared context to embedding mode would stall or disturb every slot. So the first embeddings request
creates a second context on the same weights (no second copy of the model): `embeddings` on, one sequence,
sized for what one request may use (ctx / parallel tokens, at most the training context), with a batch that
holds a whole input (a non-causal encoder needs it in one piece, and mean pooling averages one batch). Its
memory is that many KV cells plus a compute buffer for that batch; it is freed with the model.

An input cannot be cut into chunks between decode steps (mean pooling would average the last chunk only),
and evaluating a long one took the decode loop for seconds (13 s for 1,800 tokens of a 1024-wide model on a
busy 2-core machine), so inputs are evaluated on this module's thread: llama.cpp's contexts are
independent (the model's weights are only read), and the decode loop keeps stepping while they share the
cores. The engine's main thread only queues requests and cancels them.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import llama_cpp
import numpy as np

from app.engine import protocol as P
from app.engine.batch.messages import Embed, Embeddings
from app.engine.llama.worker.stream import send

POOLING_NAMES = {llama_cpp.LLAMA_POOLING_TYPE_NONE: "none", llama_cpp.LLAMA_POOLING_TYPE_MEAN: "mean",
                 llama_cpp.LLAMA_POOLING_TYPE_CLS: "cls", llama_cpp.LLAMA_POOLING_TYPE_LAST: "last",
                 llama_cpp.LLAMA_POOLING_TYPE_RANK: "rank"}
EMBEDDING_POOLING = (llama_cpp.LLAMA_POOLING_TYPE_MEAN, llama_cpp.LLAMA_POOLING_TYPE_CLS,
                     llama_cpp.LLAMA_POOLING_TYPE_LAST)


@dataclass
class _Job:
    cmd: Embed
    vectors: list[list[float]] = field(default_factory=list)
    tokens: int = 0
    cancelled: bool = False  # its client gave up: answered Done, cancelled
    dropped: bool = False  # the model went away: answered Error already


def refusal(pooling: int, architecture: str) -> str | None:
    """Why a model with this pooling type cannot embed, or None when it can."""
    if pooling in EMBEDDING_POOLING:
        return None
    if pooling == llama_cpp.LLAMA_POOLING_TYPE_RANK:
        return "This model is a reranker (pooling 'rank'): it scores pairs of texts and has no embeddings."
    return (f"This model cannot embed: it is a generation model, its GGUF declares no pooling type "
            f"({architecture}.pooling_type), so it has no one vector per text. Serve an embedding model "
            "(nomic-embed-text, bge, e5, EmbeddingGemma...) for /v1/embeddings.")


class Embedder:
    """The embeddings context of one loaded model, the Embed requests waiting for it and their thread.

    `lock` is held while a request is evaluated: `close` takes it, so the context is never freed under a
    running evaluation."""

    def __init__(self) -> None:
        self.ctx: Any = None
        self.batch: Any = None
        self.n_ctx = 0
        self.jobs: deque[_Job] = deque()
        self.lock = threading.Lock()
        self._wake = threading.Condition()
        self._llm: Any = None
        self._n_ctx_slot = 0
        threading.Thread(target=self._run, name="embeddings", daemon=True).start()

    @property
    def busy(self) -> bool:
        return bool(self.jobs)

    def close(self, reason: str) -> None:
        """Free the context (the model is going away) and fail the requests still waiting."""
        with self._wake:
            jobs, self.jobs = list(self.jobs), deque()
            self._llm = None
            for job in jobs:
                job.dropped = True
        for job in jobs:
            send(P.Error(job.cmd.request_id, "generation_failed", reason))
        with self.lock:
            if self.batch is not None:
                llama_cpp.llama_batch_free(self.batch)
                self.batch = None
            if self.ctx is not None:
                llama_cpp.llama_free(self.ctx)
                self.ctx = None

    def submit(self, llm: Any, cmd: Embed, n_ctx_slot: int, architecture: str) -> None:
        problem = "No model is loaded." if llm is None else refusal(llama_cpp.llama_pooling_type(llm._ctx.ctx),
                                                                    architecture)
        if problem is None and not cmd.inputs:
            problem = "'input' is empty."
        if problem:
            send(P.Error(cmd.request_id, "bad_request", problem))
            return
        with self._wake:
            self._llm = llm
            self._n_ctx_slot = min(n_ctx_slot, llm._model.n_ctx_train() or n_ctx_slot)
            self.jobs.append(_Job(cmd))
            self._wake.notify()

    def cancel(self, request_id: str) -> bool:
        """Drop a waiting request (answered Done, cancelled); one being evaluated ends as it would."""
        with self._wake:
            job = next((j for j in self.jobs if j.cmd.request_id == request_id), None)
            if job is None:
                return False
            job.cancelled = True
        return True

    def _run(self) -> None:  # this module's thread
        while True:
            with self._wake:
                while not self.jobs:
                    self._wake.wait()
                job, llm = self.jobs[0], self._llm
            with self.lock:
                if llm is not None and not job.cancelled:
                    self._evaluate(llm, job)
            with self._wake:
                if self.jobs and self.jobs[0] is job:
                    self.jobs.popleft()
            if job.cancelled and not job.dropped:
                send(P.Done(job.cmd.request_id, "", "cancelled", {}))

    def _create(self, llm: Any, n_ctx: int) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx
        params.n_seq_max = 1
        params.embeddings = True
        params.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED  # the model's own
        params.n_threads = llm.context_params.n_threads
        params.n_threads_batch = llm.context_params.n_threads_batch
        ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not ctx:
            raise RuntimeError("llama.cpp could not create the embeddings context")
        self.ctx, self.n_ctx = ctx, llama_cpp.llama_n_ctx(ctx)
        self.batch = llama_cpp.llama_batch_init(self.n_ctx, 0, 1)

    def _evaluate(self, llm: Any, job: _Job) -> None:
        """Every input of `job`, answered with its Embeddings or one Error (`lock` held)."""
        rid = job.cmd.request_id
        try:
            if self.ctx is None:
                self._create(llm, self._n_ctx_slot)
            for index, item in enumerate(job.cmd.inputs):
                if job.cancelled or job.dropped:
                    return
                tokens = (list(item) if isinstance(item, list)
                          else list(llm.tokenize(item.encode("utf-8"), add_bos=True, special=False)))
                job.vectors.append(self._embed(llm, tokens, index))
                job.tokens += len(tokens)
        except ValueError as exc:
            error: P.Error | None = P.Error(rid, "bad_request", str(exc))
        except Exception as exc:  # noqa: BLE001 - this request's failure, not the generating slots'
            error = P.Error(rid, "generation_failed", f"{type(exc).__name__}: {exc}")
        else:
            error = None
        if not job.dropped:
            send(error or Embeddings(rid, job.vectors, job.tokens))

    def _embed(self, llm: Any, tokens: list[int], index: int) -> list[float]:
        n_vocab = llm.n_vocab()
        if not tokens:
            raise ValueError(f"input[{index}] is empty.")
        if len(tokens) > self.n_ctx:
            raise ValueError(f"input[{index}] is {len(tokens)} tokens; an input may have at most {self.n_ctx} "
                             "(what one request may use). Shorten it, or start the server with a larger --ctx.")
        if any(not 0 <= t < n_vocab for t in tokens):
            raise ValueError(f"input[{index}] holds a token id outside the vocabulary (0 to {n_vocab - 1}).")
        mem = llama_cpp.llama_get_memory(self.ctx)
        if mem:  # an encoder-only model has no KV cache
            llama_cpp.llama_memory_clear(mem, True)
        batch = self.batch
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True  # llama.cpp wants every token an output in embedding mode
        batch.n_tokens = len(tokens)
        rc = llama_cpp.llama_decode(self.ctx, batch)
        if rc != 0:
            raise ValueError(f"input[{index}] could not be evaluated (llama_decode returned {rc}).")
        ptr = llama_cpp.llama_get_embeddings_seq(self.ctx, 0)
        if not ptr:
            raise ValueError(f"input[{index}]: llama.cpp returned no pooled embedding.")
        n_embd = llama_cpp.llama_model_n_embd_out(llm._model.model)
        vec = np.ctypeslib.as_array(ptr, shape=(n_embd,)).astype(np.float64)
        norm = float(np.linalg.norm(vec))
        return (vec / norm if norm > 0 else vec).tolist()  # L2-normalized, as OpenAI's and llama-server's
