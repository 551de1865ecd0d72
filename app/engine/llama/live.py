"""Live phase numbers for the window: the prefill event at the first token, and the warm-up after a load.

Prefill is over when the first token exists, so its rate, the prompt's new/reused split and the KV cache
filled so far are known then; the window should not wait for the end of the reply to show them
(`prefilled_event`).

The first reply after a load used to be measured cold: page faults on the freshly mapped weights, the
CPU_REPACK copy's first touch and llama.cpp's thread pool starting made its TTFT 580-935 ms where a warm
one took ~70 ms. `warm_up` runs a short prompt and two decode steps right after the engine reports the load
(so the window is not kept waiting), then empties the KV cache and resets llama.cpp's counters: none of it
is counted.

Imported only by the engine worker; it works through the `Llama` object it is given.
"""

from __future__ import annotations

import time
from typing import Any

from app.engine import protocol as P

WARMUP_PROMPT = 8  # tokens: a batch (prompt path) and then single-token steps (decode path)
WARMUP_DECODE = 2


def warm_up(llm: Any) -> float:
    """Run a short uncounted prompt + decode, leave the cache empty; returns the milliseconds it took."""
    t0 = time.perf_counter()
    bos = llm.token_bos()
    first = max(bos, 0)
    n = max(1, min(WARMUP_PROMPT, llm.n_ctx() - WARMUP_DECODE - 1))
    llm.reset()
    llm.eval([first] * n)
    for _ in range(WARMUP_DECODE):
        llm.eval([first])
    # llama.cpp books a batch's time into its counters when the batch is synchronised: reading the logits
    # does that now, so none of the warm-up lands in the first reply's prefill
    llm._ctx.get_logits()
    llm._ctx.reset_timings()
    llm._ctx.kv_cache_clear()  # the chat starts from an empty cache
    llm.reset()
    return (time.perf_counter() - t0) * 1000.0


def prefilled_event(engine: Any, request_id: str, n_prompt: int, perf0: Any, first: Any,
                    ttft_ms: float) -> P.Prefilled:
    """The event sent with the first token: the same prefill split as the reply's final metrics (everything
    evaluated before the first token was prompt), the cache as it is now, and what each further token adds
    to it (allocated bytes per cell: exact for full-attention caches; a sliding-window one stops growing)."""
    cells = engine.kv_cells_used()
    loaded = engine.loaded
    per_cell = loaded.kv_bytes_allocated / loaded.kv_cells_allocated if loaded and loaded.kv_cells_allocated else 0.0
    return P.Prefilled(
        request_id=request_id, prompt_tokens=n_prompt,
        prefill_tokens=(first.n_p_eval - perf0.n_p_eval) + (first.n_eval - perf0.n_eval),
        prefill_ms=(first.t_p_eval_ms - perf0.t_p_eval_ms) + (first.t_eval_ms - perf0.t_eval_ms),
        ttft_ms=ttft_ms, kv_cells_used=cells, kv_bytes_used=engine.kv_bytes_used(cells), kv_bytes_per_cell=per_cell)
