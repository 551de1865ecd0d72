"""One generation in the engine process: the request's prompt tokens (dropping the oldest chat turns when they
overflow the context), the decode loop (plain, rolling context, prompt lookup or a draft model), stop strings,
token bursts, and the phase metrics split at the first token from llama.cpp's own counters.
"""

from __future__ import annotations

import codecs
import dataclasses
import random
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import llama_cpp

from app.core.chat.templates import render
from app.core.metrics.phase import PhaseMetrics
from app.core.sampling.chain import Sampler, SamplerParams
from app.core.sampling.constraint import TokenConstraint, grammar_timings
from app.core.sampling.logprobs import logprob_entry
from app.engine import protocol as P
from app.engine.llama.context_overflow import ContextOverflow, context_limit, fit_prompt
from app.engine.llama.decoding import plain_tokens, prefill_progress
from app.engine.llama.draft_model import DraftModelLookup
from app.engine.llama.grammar_vocab import constraint_for
from app.engine.llama.live import prefilled_event
from app.engine.llama.prompt_lookup import PromptLookup
from app.engine.llama.worker import saved_kv
from app.engine.llama.worker.reply_evidence import ReplyEvidence
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


@dataclass
class _Run:
    """What the steps of one generation share."""

    req: P.Generate
    tokens: list[int]  # the prompt, as fitted to the context
    t_request: float
    restored: saved_kv.Restore
    metrics: PhaseMetrics
    reply: ReasoningStream
    perf0: Perf  # llama.cpp's counters before the prefill
    token_out: TokenOut
    perf_first: Perf | None = None  # ... and at the first token
    times: list[float] = field(default_factory=list)  # when each token came
    generated: int = 0
    finish: str = "length"
    held: str = ""  # text held back while it could still be the start of a stop string


def run_generation(engine: Engine, req: P.Generate) -> None:
    """One request: its prompt, the decode loop streaming the reply, then Done with the phase metrics."""
    if engine.llm is None:
        send(P.Error(req.request_id, "bad_request", "No model is loaded."))
        return
    t_request = time.monotonic()
    evidence = ReplyEvidence()  # what the machine did meanwhile: "why is it slow?"
    tokens, dropped = engine._prompt_tokens(req)
    tokens, overflow = fit_prompt(engine.llm, req, tokens, engine.template)
    max_tokens = overflow.max_tokens(req.sampling.max_tokens, len(tokens))
    restored = saved_kv.restore(engine, req, tokens)  # the chat's saved KV, when it holds more than the cache
    sampler = _sampler(engine.llm, req.sampling, constraint_for(engine.llm, req.grammar), req.logprobs)
    run = _start(engine, req, tokens, t_request, restored)
    gen, lookup = _token_source(engine, req, tokens, overflow, sampler)
    t_prefill = time.monotonic()

    def progress(done: int, total: int) -> None:  # a long prompt's prefill, chunk by chunk
        send(P.PrefillProgress(req.request_id, done, total, (time.monotonic() - t_prefill) * 1000.0))

    try:
        with prefill_progress(progress):  # the token sources prefill at their first next()
            _decode(engine, run, gen, max_tokens)
    finally:
        gen.close()
        run.token_out.flush()  # whatever was streamed reaches the app, even if an error follows
    _end_stream(run)
    _phase_metrics(engine, run, lookup)
    data = _done_data(engine, run, dropped, overflow, lookup)
    data.update(_sampler_data(engine, run, sampler))
    data["evidence"] = evidence.finish(engine)
    _remember_rates(engine, run.metrics, lookup)
    send(P.Done(req.request_id, run.reply.answer, run.finish, data, reasoning=run.reply.reasoning))
    saved_kv.save(engine, req, shifted=bool(data.get("context_shifts")))  # after Done: the reply is not kept waiting


def _sampler(llm: Any, s: P.Sampling, constraint: TokenConstraint | None = None,
             logprobs: int | None = None) -> Sampler:
    """The request's sampler, on its seed or a random one, with its grammar and log-probabilities if asked."""
    seed = s.seed if s.seed is not None and s.seed >= 0 else random.randint(0, 2**31 - 1)
    return Sampler(SamplerParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p,
                                 repeat_penalty=s.repeat_penalty), llm.n_vocab(), seed,
                   constraint=constraint, logprobs=logprobs)


def _sampler_data(engine: Engine, run: _Run, sampler: Sampler) -> dict[str, Any]:
    """What the grammar cost (over the decode's wall time: llama.cpp's counters leave sampling out) and the
    reply tokens' log-probabilities (not the end-of-generation token's), where the request had them."""
    data: dict[str, Any] = {}
    if sampler.constraint is not None:
        wall = (run.times[-1] - run.times[0]) * 1000.0 if len(run.times) > 1 else 0.0
        data.update(grammar_timings(sampler.constraint, len(run.times), wall))
    if sampler.logprobs_top is not None:
        data["logprobs"] = [logprob_entry(d, engine._piece) for d in sampler.logprobs[:len(run.times)]]
    return data


def _start(engine: Engine, req: P.Generate, tokens: list[int], t_request: float,
           restored: saved_kv.Restore) -> _Run:
    """The generation's state before its prefill, llama.cpp's counters read from zero."""
    llm = engine.llm
    metrics = PhaseMetrics(prompt_tokens=len(tokens), load_ms=engine.loaded.load_ms if engine.loaded else 0.0)
    split = req.messages is not None and req.split_reasoning
    reply = ReasoningStream(req.request_id, t_request, split, split and prompt_opens_thinking(llm, tokens))
    # Counters accumulate across calls; start each generation from zero (and still take deltas).
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    perf0 = engine._perf()
    token_out = TokenOut(burst_interval_s(req.stream_interval_ms))
    return _Run(req, tokens, t_request, restored, metrics, reply, perf0, token_out)


def _token_source(engine: Engine, req: P.Generate, tokens: list[int], overflow: ContextOverflow,
                  sampler: Sampler) -> tuple[Generator[int, None, None], PromptLookup | None]:
    """The tokens of the reply: with a rolling context, prompt lookup or a draft model, or plain decoding.
    Returns them with the lookup, if one drafts them."""
    llm = engine.llm
    if overflow.rolling:  # before prompt lookup, which cannot shift the cache
        return overflow.tokens(llm, tokens, sampler), None
    if req.prompt_lookup or engine.draft is not None:
        lookup = PromptLookup(llm, sampler, plain_ms_hint=engine._plain_ms_per_token) if engine.draft is None \
            else DraftModelLookup(llm, sampler, engine.draft, plain_ms_hint=engine._plain_ms_per_token)
        return lookup.generate(tokens), lookup
    return plain_tokens(llm, tokens, sampler), None


def _decode(engine: Engine, run: _Run, gen: Iterator[int], max_tokens: int) -> None:
    """The decode loop: each token timed and its text streamed, until the end of generation, a stop string,
    the length limit or a cancel (`run.finish` says which)."""
    s = run.req.sampling
    vocab = engine.llm._model.vocab
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    stop_len = max((len(x) for x in s.stop), default=0)
    for token in gen:
        now = time.monotonic()
        run.generated += 1
        if run.perf_first is None:
            _first_token(engine, run, now)
        if llama_cpp.llama_vocab_is_eog(vocab, token) and not s.ignore_eos:
            run.finish = "stop"
            return
        piece = decoder.decode(engine._piece(token))
        run.times.append(now)
        if piece and _stream_piece(run, piece, now, stop_len):
            return
        if run.generated >= max_tokens:
            run.finish = "length" if run.generated >= s.max_tokens else "context_full"
            return
        if engine.poll_interrupt(run.req.request_id):
            run.finish = "cancelled"
            return


def _first_token(engine: Engine, run: _Run, now: float) -> None:
    """At the first token: the time to it, and the Prefilled event (with what the saved KV spared)."""
    run.perf_first = engine._perf()
    run.metrics.ttft_ms = (now - run.t_request) * 1000.0
    n_prompt = len(run.tokens)
    pre = prefilled_event(engine, run.req.request_id, n_prompt, run.perf0, run.perf_first, run.metrics.ttft_ms)
    restored = run.restored
    restored.estimate(engine._prefill_ms_per_token, n_prompt, pre.prefill_tokens, pre.prefill_ms)
    send(dataclasses.replace(pre, restored_tokens=restored.tokens, restore_ms=restored.ms,
                             restore_prefill_ms=restored.prefill_estimate_ms, restore_note=restored.note))


def _stream_piece(run: _Run, piece: str, now: float, stop_len: int) -> bool:
    """Stream a token's text but what could still begin a stop string (held back). True at a stop string,
    whose text is dropped with what follows it."""
    run.held += piece
    hit = _find_stop(run.held, run.req.sampling.stop)
    if hit is not None:
        run.held = run.held[:hit]
        run.finish = "stop"
    cut = len(run.held) if run.finish == "stop" else max(0, len(run.held) - (stop_len - 1 if stop_len else 0))
    out, run.held = run.held[:cut], run.held[cut:]
    event = run.reply.emit(out, now, run.generated) if out else None
    if event is not None:
        run.token_out.add(event)
    return run.finish == "stop"


def _end_stream(run: _Run) -> None:
    """The text still held back (unless a stop string ended the reply) and the reply's end, sent."""
    held = run.reply.emit(run.held, time.monotonic(), run.generated) if run.held and run.finish != "stop" else None
    for event in (held, run.reply.finish(time.monotonic())):
        if event is not None:
            run.token_out.add(event)
    run.token_out.flush()


def _phase_metrics(engine: Engine, run: _Run, lookup: PromptLookup | None) -> None:
    """The reply's metrics from llama.cpp's counters and the token times, the cache and memory after it."""
    t_end = time.monotonic()
    perf0, perf1 = run.perf0, engine._perf()
    first = run.perf_first or perf1
    m = run.metrics
    # Phases split at the first token: everything evaluated before it was prompt (even a lone
    # last prompt token that llama.cpp counts as a "generation" call), everything after is decode.
    m.prefill_tokens = (first.n_p_eval - perf0.n_p_eval) + (first.n_eval - perf0.n_eval)
    m.prefill_ms = (first.t_p_eval_ms - perf0.t_p_eval_ms) + (first.t_eval_ms - perf0.t_eval_ms)
    m.reused_tokens = max(0, len(run.tokens) - m.prefill_tokens)
    m.decode_tokens = perf1.n_eval - first.n_eval
    m.decode_ms = perf1.t_eval_ms - first.t_eval_ms
    if lookup is not None:
        # Draft batches count as prompt batches in llama.cpp: decode is every call after the first
        # token, and its rate is tokens produced per second of those calls (the effective speed).
        m.decode_tokens = max(0, run.generated - 1)
        m.decode_ms += perf1.t_p_eval_ms - first.t_p_eval_ms
        m.draft_tokens = lookup.drafted
        m.draft_accepted = lookup.accepted
        m.drafter = lookup.drafter
    m.generated_tokens = run.generated
    times = run.times
    m.itl_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
    m.decode_wall_ms = (times[-1] - times[0]) * 1000.0 if len(times) > 1 else 0.0
    m.total_ms = (t_end - run.t_request) * 1000.0
    st = engine.stats()
    m.kv_cells_used, m.kv_cells_allocated = st.kv_cells_used, st.kv_cells_allocated
    m.kv_bytes_used, m.kv_bytes_allocated = st.kv_bytes_used, st.kv_bytes_allocated
    m.rss_bytes = st.rss_bytes


def _done_data(engine: Engine, run: _Run, dropped: int, overflow: ContextOverflow,
               lookup: PromptLookup | None) -> dict[str, Any]:
    """The metrics that Done carries: the phases, then what the prompt, reasoning, overflow, lookup and saved
    KV did."""
    data = run.metrics.to_dict()
    data["messages_dropped"] = dropped
    data["chat_template"] = engine.template.name if engine.template and run.req.messages is not None else "none"
    data["token_times"] = run.times
    data.update(run.reply.metrics())
    data.update(overflow.metrics())
    if lookup is not None:
        data["lookup_batch_steps"] = lookup.batch_steps
        data["lookup_plain_steps"] = lookup.plain_steps
        data["lookup_speedup"] = lookup.speedup(engine._plain_ms_per_token)
        data["lookup_pauses"] = lookup.pauses  # times drafting stopped because it was losing
    data.update(run.restored.metrics())
    return data


def _remember_rates(engine: Engine, metrics: PhaseMetrics, lookup: PromptLookup | None) -> None:
    """This reply's plain decode rate (the reference of lookup runs) and its prefill rate (saved KV's estimates),
    where it measured them."""
    if lookup is None and metrics.decode_tokens > 0:
        engine._plain_ms_per_token = metrics.decode_ms / metrics.decode_tokens
    if metrics.prefill_tokens >= saved_kv.MIN_RATE_TOKENS and metrics.prefill_ms > 0:
        engine._prefill_ms_per_token = metrics.prefill_ms / metrics.prefill_tokens


def _find_stop(text: str, stops: list[str]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None
