"""llama-bench style measurement in the engine process: pp (prompt batches) and tg (one token at a time) of
random tokens, at an optional depth of tokens already in the cache, with llama-bench's field names.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import llama_cpp

from app.engine import protocol as P
from app.engine.llama.worker.stream import send

if TYPE_CHECKING:
    from app.engine.llama.worker.engine import Engine


def run_bench(engine: Engine, req: P.Bench) -> None:
    if engine.llm is None:
        send(P.Error(req.request_id, "bad_request", "No model is loaded."))
        return
    llm = engine.llm
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
            if engine.poll_interrupt(req.request_id):
                send(P.Error(req.request_id, "cancelled", "Benchmark cancelled."))
                return
            samples.append(one_run())
    finally:
        clear()
        llm.n_tokens = 0  # the chat's cached prefix is gone
    assert engine.loaded is not None
    send(P.BenchResult(
        request_id=req.request_id, n_prompt=req.n_prompt, n_gen=req.n_gen, n_depth=req.n_depth,
        samples_ns=samples, n_threads=engine.loaded.n_threads,
        model_info={
            "model_filename": engine.loaded.model_path, "model_type": engine.loaded.model_desc,
            "model_size": engine.loaded.model_size, "model_n_params": engine.loaded.n_params,
            "n_batch": llm.n_batch, "n_ubatch": llm.context_params.n_ubatch,
            "type_k": engine.loaded.type_k, "type_v": engine.loaded.type_v,
            "n_gpu_layers": engine.loaded.n_gpu_layers, "flash_attn": bool(engine.loaded.flash_attn),
            "n_threads": engine.loaded.n_threads, "use_mmap": llm.model_params.load_mode in (
                llama_cpp.LLAMA_LOAD_MODE_MMAP, llama_cpp.LLAMA_LOAD_MODE_MMAP_MLOCK),
        },
    ))
