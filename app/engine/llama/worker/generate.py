"""One generation in the engine process: the request's prompt tokens (dropping the oldest chat turns when they
overflow the context), the decode loop (plain, rolling context, prompt lookup or a draft model), stop strings,
token bursts, and the phase metrics split at the first token from llama.cpp's own counters.
"""

from __future__ import annotations

import codecs
import dataclasses
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import llama_cpp

from app.core.chat.templates import render
from app.core.metrics.phase import PhaseMetrics
from app.core.sampling.chain import Sampler, SamplerParams
from app.engine import protocol as P
from app.engine.llama.context_overflow import context_limit, fit_prompt
from app.engine.llama.decoding import plain_tokens
from app.engine.llama.draft_model import DraftModelLookup
from app.engine.llama.live import prefilled_event
from app.engine.llama.prompt_lookup import PromptLookup
from app.engine.llama.worker import saved_kv
from app.engine.llama.worker.stream import TokenOut, burst_interval_s, send
from app.engine.reasoning_stream import ReasoningStream, prompt_opens_thinking

if TYPE_CHECKING:
    from app.engine.llama.worker.engine import Engine


@dataclass
class Perf:
    t_p_eval_ms: float
    t_eval_ms: float
    n_p_eval: int
    n_eval: int


def read_perf(llm: Any) -> Perf:
    d = llama_cpp.llama_perf_context(llm._ctx.ctx)
    # llama.cpp reports max(1, n) for both counts, so a count of 1 with no time spent is really 0.
    n_p = d.n_p_eval if d.t_p_eval_ms > 0 else 0
    n_e = d.n_eval if d.t_eval_ms > 0 else 0
    return Perf(d.t_p_eval_ms, d.t_eval_ms, n_p, n_e)


def prompt_tokens(engine: Engine, req: P.Generate) -> tuple[list[int], int]:
    """Tokens of the request; drops the oldest chat turns when the prompt would overflow the context.

    Returns (tokens, number of messages dropped)."""
    llm = engine.llm
    n_ctx = context_limit(llm)  # the context asked for (llama.cpp pads small ones)
    room = n_ctx - max(1, min(req.sampling.max_tokens, n_ctx // 2))
    if req.messages is None:
        text = req.prompt or ""
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=llm._model.add_bos_token(), special=False)
        if len(tokens) >= n_ctx and req.context_overflow == "stop":
            raise ValueError(f"The prompt is {len(tokens)} tokens but the context holds {n_ctx}. "
                             "Shorten the prompt or load the model with a larger context.")
        return tokens, 0
    assert engine.template is not None
    messages = list(req.messages)
    dropped = 0
    while True:
        bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
        eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
        text = render(engine.template, messages, bos_token=bos, eos_token=eos)
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


def run_generation(engine: Engine, req: P.Generate) -> None:
    if engine.llm is None:
        send(P.Error(req.request_id, "bad_request", "No model is loaded."))
        return
    t_request = time.monotonic()
    llm = engine.llm
    s = req.sampling
    tokens, dropped = engine._prompt_tokens(req)
    tokens, overflow = fit_prompt(llm, req, tokens, engine.template)
    max_tokens = overflow.max_tokens(s.max_tokens, len(tokens))
    restored = saved_kv.restore(engine, req, tokens)  # the chat's saved KV, when it holds more than the cache
    seed = s.seed if s.seed is not None and s.seed >= 0 else random.randint(0, 2**31 - 1)
    sampler = Sampler(SamplerParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p,
                                    repeat_penalty=s.repeat_penalty), llm.n_vocab(), seed)
    vocab = llm._model.vocab
    metrics = PhaseMetrics(prompt_tokens=len(tokens), load_ms=engine.loaded.load_ms if engine.loaded else 0.0)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    split = req.messages is not None and req.split_reasoning
    reply = ReasoningStream(req.request_id, t_request, split, split and prompt_opens_thinking(llm, tokens))
    held = ""  # text held back while it could still be the start of a stop string
    stop_len = max((len(x) for x in s.stop), default=0)
    finish = "length"
    times: list[float] = []
    # Counters accumulate across calls; start each generation from zero (and still take deltas).
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    perf0 = engine._perf()
    perf_first: Perf | None = None
    generated = 0
    token_out = TokenOut(burst_interval_s(req.stream_interval_ms))
    lookup: PromptLookup | None = None
    if overflow.rolling:  # before prompt lookup, which cannot shift the cache
        gen = overflow.tokens(llm, tokens, sampler)
    elif req.prompt_lookup or engine.draft is not None:
        lookup = PromptLookup(llm, sampler, plain_ms_hint=engine._plain_ms_per_token) if engine.draft is None \
            else DraftModelLookup(llm, sampler, engine.draft, plain_ms_hint=engine._plain_ms_per_token)
        gen = lookup.generate(tokens)
    else:
        gen = plain_tokens(llm, tokens, sampler)
    try:
        for token in gen:
            now = time.monotonic()
            generated += 1
            if perf_first is None:
                perf_first = engine._perf()
                metrics.ttft_ms = (now - t_request) * 1000.0
                pre = prefilled_event(engine, req.request_id, len(tokens), perf0, perf_first, metrics.ttft_ms)
                restored.estimate(engine._prefill_ms_per_token, len(tokens), pre.prefill_tokens, pre.prefill_ms)
                send(dataclasses.replace(pre, restored_tokens=restored.tokens, restore_ms=restored.ms,
                                         restore_prefill_ms=restored.prefill_estimate_ms,
                                         restore_note=restored.note))
            if llama_cpp.llama_vocab_is_eog(vocab, token) and not s.ignore_eos:
                finish = "stop"
                break
            piece = decoder.decode(engine._piece(token))
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
            if engine.poll_interrupt(req.request_id):
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
    perf1 = engine._perf()
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
        metrics.drafter = lookup.drafter
    metrics.generated_tokens = generated
    metrics.itl_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
    metrics.decode_wall_ms = (times[-1] - times[0]) * 1000.0 if len(times) > 1 else 0.0
    metrics.total_ms = (t_end - t_request) * 1000.0
    st = engine.stats()
    metrics.kv_cells_used = st.kv_cells_used
    metrics.kv_cells_allocated = st.kv_cells_allocated
    metrics.kv_bytes_used = st.kv_bytes_used
    metrics.kv_bytes_allocated = st.kv_bytes_allocated
    metrics.rss_bytes = st.rss_bytes
    data = metrics.to_dict()
    data["messages_dropped"] = dropped
    data["chat_template"] = engine.template.name if engine.template and req.messages is not None else "none"
    data["token_times"] = times
    data.update(reply.metrics())
    data.update(overflow.metrics())
    if lookup is not None:
        data["lookup_batch_steps"] = lookup.batch_steps
        data["lookup_plain_steps"] = lookup.plain_steps
        data["lookup_speedup"] = lookup.speedup(engine._plain_ms_per_token)
        data["lookup_pauses"] = lookup.pauses  # times drafting stopped because it was losing
    elif metrics.decode_tokens > 0:
        engine._plain_ms_per_token = metrics.decode_ms / metrics.decode_tokens  # reference for lookup runs
    if metrics.prefill_tokens >= saved_kv.MIN_RATE_TOKENS and metrics.prefill_ms > 0:
        engine._prefill_ms_per_token = metrics.prefill_ms / metrics.prefill_tokens
    data.update(restored.metrics())
    send(P.Done(req.request_id, reply.answer, finish, data, reasoning=reply.reasoning))
    saved_kv.save(engine, req, shifted=bool(data.get("context_shifts")))  # after Done: the reply is not kept waiting



def _find_stop(text: str, stops: list[str]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None
