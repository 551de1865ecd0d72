"""Writes the recorded expositions in tests/data/remote_metrics: each engine's /metrics as that engine would
render it for one made-up workload, two scrapes 60 s apart. Run `python tests/helpers/engine_recordings.py` to
write them again (the files are committed; the tests read the files, not this).

The names, label names, bucket bounds and metric kinds are copied from each engine's source (see the README
beside the files, and app/core/remote/engines.py); the Python engines render through prometheus_client, as
this does, so the text is theirs to the byte but for the values and the `_created` times. llama-server's C++
writer is imitated line by line (HELP, TYPE, `llamacpp:name value`).

The workload, the same for every engine: before the first scrape, 2 slow requests (prompt 100 tokens, 11
generated, TTFT 3 s, ITL 0.2 s); between the two scrapes, 4 requests of prompt 512 (128 of them found in the
prefix cache), 129 generated, queue 0.05 s, prefill 0.25 s, TTFT 0.3 s, 128 decode steps of 0.02 s, one
preemption, 400 drafted tokens of which 300 accepted (100 and 10 before); at the second scrape 2 requests
running, 1 waiting, KV cache 4096 of 16384 tokens (0.25) used.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

OUT = Path(__file__).resolve().parents[1] / "data" / "remote_metrics"


@dataclass(frozen=True)
class Request:
    prompt: int
    cached: int
    generated: int
    queue_s: float
    prefill_s: float
    ttft_s: float
    itl_s: float

    @property
    def decode_s(self) -> float:
        return (self.generated - 1) * self.itl_s


EARLY = [Request(100, 0, 11, 0.5, 2.9, 3.0, 0.2)] * 2
RECENT = [Request(512, 128, 129, 0.05, 0.25, 0.3, 0.02)] * 4
STATE_A = {"running": 0, "waiting": 0, "kv_used": 0, "preempt": 0, "draft": 100, "accepted": 10}
STATE_B = {"running": 2, "waiting": 1, "kv_used": 4096, "preempt": 1, "draft": 500, "accepted": 310}
KV_CAPACITY = 16384

VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
VLLM_REQ = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0]
V0_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
V0_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
V0_REQ = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
SGL_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGL_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200,
           0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]
SGL_QUEUE = [0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500,
             600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]
TRT_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
TRT_PREFILL = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0,
               2560.0]


def _recent_hit_rate(requests: list[Request]) -> float:
    """What the engines' hit-rate gauges hold: the rate over their latest interval."""
    last = requests[-1]
    return last.cached / last.prompt


def _recent_acceptance(state: dict[str, int]) -> float:
    if state is STATE_A:
        return state["accepted"] / state["draft"]
    return (state["accepted"] - STATE_A["accepted"]) / (state["draft"] - STATE_A["draft"])


def _buckets_125(max_value: int) -> list[int]:
    """vLLM's build_1_2_5_buckets."""
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            if m * 10**exponent > max_value:
                return out
            out.append(m * 10**exponent)
        exponent += 1


def _vllm(requests: list[Request], state: dict[str, int], v0: bool) -> str:
    reg = CollectorRegistry()
    labels = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}
    if v0:
        labels = {"model_name": labels["model_name"]}
    names = list(labels)

    def g(name: str, doc: str) -> Gauge:
        return Gauge(name, doc, names, registry=reg)

    def c(name: str, doc: str, extra: list[str] | None = None) -> Counter:
        return Counter(name, doc, names + (extra or []), registry=reg)

    def h(name: str, doc: str, buckets: list[float]) -> Histogram:
        return Histogram(name, doc, names, buckets=buckets, registry=reg)

    g("vllm:num_requests_running", "Number of requests in model execution batches.").labels(**labels).set(
        state["running"])
    g("vllm:num_requests_waiting", "Number of requests waiting to be processed.").labels(**labels).set(
        state["waiting"])
    usage = state["kv_used"] / KV_CAPACITY
    if v0:
        g("vllm:num_requests_swapped", "Number of requests swapped to CPU.").labels(**labels).set(0)
        g("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.").labels(**labels).set(usage)
        g("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.").labels(**labels).set(
            _recent_hit_rate(requests))
        acc = _recent_acceptance(state)
        g("vllm:spec_decode_draft_acceptance_rate", "Speulative token acceptance rate.").labels(**labels).set(acc)
        preempt = c("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
    else:
        g("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.").labels(**labels).set(usage)
        queries = c("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.")
        hits = c("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        queries.labels(**labels).inc(sum(r.prompt for r in requests))
        hits.labels(**labels).inc(sum(r.cached for r in requests))
        preempt = c("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
    preempt.labels(**labels).inc(state["preempt"])
    prompt = c("vllm:prompt_tokens", "Number of prefill tokens processed.")
    gen = c("vllm:generation_tokens", "Number of generation tokens processed.")
    success = c("vllm:request_success", "Count of successfully processed requests.", ["finished_reason"])
    draft = c("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
    accepted = c("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
    draft.labels(**labels).inc(state["draft"])
    accepted.labels(**labels).inc(state["accepted"])
    req_prompt = h("vllm:request_prompt_tokens", "Number of prefill tokens processed.", _buckets_125(4096))
    req_gen = h("vllm:request_generation_tokens", "Number of generation tokens processed.", _buckets_125(4096))
    ttft = h("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
             V0_TTFT if v0 else VLLM_TTFT)
    if v0:
        itl = h("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", V0_TPOT)
        tpot = None
    else:
        itl = h("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", VLLM_ITL)
        tpot = h("vllm:request_time_per_output_token_seconds",
                 "Histogram of time_per_output_token_seconds per request.", VLLM_ITL)
    req = V0_REQ if v0 else VLLM_REQ
    e2e = h("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", req)
    queue = h("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", req)
    infer = h("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", req)
    prefill = h("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", req)
    decode = h("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", req)
    for r in requests:
        prompt.labels(**labels).inc(r.prompt)
        gen.labels(**labels).inc(r.generated)
        success.labels(**labels, finished_reason="stop").inc()
        req_prompt.labels(**labels).observe(r.prompt)
        req_gen.labels(**labels).observe(r.generated)
        ttft.labels(**labels).observe(r.ttft_s)
        for _ in range(r.generated - 1):
            itl.labels(**labels).observe(r.itl_s)
        if tpot is not None:
            tpot.labels(**labels).observe(r.itl_s)
        e2e.labels(**labels).observe(r.queue_s + r.prefill_s + r.decode_s)
        queue.labels(**labels).observe(r.queue_s)
        infer.labels(**labels).observe(r.prefill_s + r.decode_s)
        prefill.labels(**labels).observe(r.prefill_s)
        decode.labels(**labels).observe(r.decode_s)
    return generate_latest(reg).decode()


def _sglang(requests: list[Request], state: dict[str, int]) -> str:
    reg = CollectorRegistry()
    labels = {"model_name": "Qwen/Qwen2.5-7B-Instruct", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    names = list(labels)

    def g(name: str, doc: str, value: float) -> None:
        Gauge(name, doc, names, registry=reg).labels(**labels).set(value)

    g("sglang:num_running_reqs", "The number of running requests.", state["running"])
    g("sglang:num_used_tokens", "The number of used tokens.", state["kv_used"])
    g("sglang:token_usage", "The token usage.", state["kv_used"] / KV_CAPACITY)
    g("sglang:gen_throughput", "The generation throughput (token/s).", 100.0 if state["running"] else 0.0)
    g("sglang:num_queue_reqs", "The number of requests in the waiting queue.", state["waiting"])
    g("sglang:cache_hit_rate", "The prefix cache hit rate.", _recent_hit_rate(requests))
    g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", KV_CAPACITY)
    g("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total "
      "draft tokens` in batch).", _recent_acceptance(state))
    retracted = Counter("sglang:num_retracted_requests_total", "Total number of retracted requests.", names,
                        registry=reg)
    retracted.labels(**labels).inc(state["preempt"])
    queue = Histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", names,
                      buckets=SGL_QUEUE, registry=reg)
    prompt = Counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", names, registry=reg)
    gen = Counter("sglang:generation_tokens_total", "Number of generation tokens processed.", names, registry=reg)
    cached = Counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", names, registry=reg)
    n_req = Counter("sglang:num_requests_total", "Number of requests processed.", names, registry=reg)
    ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", names,
                     buckets=SGL_TTFT, registry=reg)
    itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", names,
                    buckets=SGL_ITL, registry=reg)
    for r in requests:
        queue.labels(**labels).observe(r.queue_s)
        prompt.labels(**labels).inc(r.prompt)
        gen.labels(**labels).inc(r.generated)
        if r.cached:
            cached.labels(**labels).inc(r.cached)
        n_req.labels(**labels).inc()
        ttft.labels(**labels).observe(r.ttft_s)
        for _ in range(r.generated - 1):  # observe_inter_token_latency with num_new_tokens=1
            itl.labels(**labels).observe(r.itl_s)
    return generate_latest(reg).decode()


def _trtllm(requests: list[Request], state: dict[str, int]) -> str:
    reg = CollectorRegistry()
    labels = {"model_name": "nvidia/Llama-3.1-8B-Instruct-FP8", "engine_type": "trtllm"}
    names = list(labels)
    p = "trtllm_"

    def g(name: str, doc: str, value: float) -> None:
        Gauge(p + name, doc, names, registry=reg).labels(**labels).set(value)

    def h(name: str, doc: str, buckets: list[float]) -> Histogram:
        return Histogram(p + name, doc, names, buckets=buckets, registry=reg)

    success = Counter(p + "request_success_total", "Count of successfully processed requests.",
                      names + ["finished_reason"], registry=reg)
    e2e = h("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", VLLM_REQ)
    ttft = h("time_to_first_token_seconds", "Histogram of time to first token in seconds.", VLLM_TTFT)
    tpot = h("time_per_output_token_seconds", "Histogram of time per output token in seconds.", TRT_TPOT)
    queue = h("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", VLLM_REQ)
    prefill = h("request_prefill_time_seconds", "Histogram of prefill (context) phase duration in seconds "
                "(first_token_time - first_scheduled_time).", TRT_PREFILL)
    decode = h("request_decode_time_seconds", "Histogram of decode (generation) phase duration in seconds "
               "(last_token_time - first_token_time).", VLLM_REQ)
    prompt = Counter(p + "prompt_tokens_total", "Cumulative number of prompt (input) tokens processed.", names,
                     registry=reg)
    gen = Counter(p + "generation_tokens_total", "Cumulative number of generation (output) tokens produced.", names,
                  registry=reg)
    cached = Counter(p + "prompt_cached_tokens_total", "Process-lifetime total prompt tokens served from KV cache. "
                     "Resets only when the serving process restarts, not when the KV cache is flushed or evicted.",
                     names, registry=reg)
    for r in requests:
        success.labels(**labels, finished_reason="stop").inc()
        e2e.labels(**labels).observe(r.queue_s + r.prefill_s + r.decode_s)
        ttft.labels(**labels).observe(r.ttft_s)
        tpot.labels(**labels).observe(r.itl_s)
        queue.labels(**labels).observe(r.queue_s)
        prefill.labels(**labels).observe(r.prefill_s)
        decode.labels(**labels).observe(r.decode_s)
        prompt.labels(**labels).inc(r.prompt)
        gen.labels(**labels).inc(r.generated)
        cached.labels(**labels).inc(r.cached)
    g("kv_cache_hit_rate", "KV cache hit rate", _recent_hit_rate(requests))
    g("kv_cache_utilization", "KV cache utilization", state["kv_used"] / KV_CAPACITY)
    g("num_requests_running", "Number of active requests", state["running"])
    g("num_requests_waiting", "Number of queued requests", state["waiting"])
    g("kv_cache_max_blocks", "Maximum number of KV cache blocks", KV_CAPACITY // 32)
    g("kv_cache_free_blocks", "Number of free KV cache blocks", (KV_CAPACITY - state["kv_used"]) // 32)
    g("kv_cache_used_blocks", "Number of used KV cache blocks", state["kv_used"] // 32)
    g("kv_cache_tokens_per_block", "Number of tokens per KV cache block", 32)
    draft = Counter(p + "spec_decode_num_draft_tokens_total", "Total number of draft tokens in speculative decoding",
                    names, registry=reg)
    accepted = Counter(p + "spec_decode_num_accepted_tokens_total",
                       "Total number of accepted tokens in speculative decoding", names, registry=reg)
    draft.labels(**labels).inc(state["draft"])
    accepted.labels(**labels).inc(state["accepted"])
    return generate_latest(reg).decode()


def _llama_server(requests: list[Request], state: dict[str, int]) -> str:
    """llama-server's writer: `<< item.value` of a double (C++ stream default: 6 significant digits)."""
    def num(v: float) -> str:
        return f"{v:.6g}"

    counters = [  # this version counts cached prompt tokens apart from those it evaluated
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
         sum(r.prompt - r.cached for r in requests)),
        ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
         sum(r.cached for r in requests)),
        ("prompt_seconds_total", "Total time spent processing prompts", sum(r.prefill_s for r in requests)),
        ("tokens_predicted_total", "Number of generation tokens processed", sum(r.generated for r in requests)),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens", sum(r.decode_s for r in requests)),
        ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal "
         "decoding", sum(r.generated for r in requests)),
        ("n_tokens_max", "Largest observed sequence length (prompt + generation)",
         max(r.prompt + r.generated for r in requests)),
        ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", state["draft"]),
        ("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model",
         state["accepted"]),
        ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps",
         state["draft"] // 4),
    ]
    gauges = [
        ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", 2048.0),
        ("predicted_tokens_seconds", "Average generation throughput in tokens/s", 50.0),
        ("requests_processing", "Number of requests processing", state["running"]),
        ("requests_deferred", "Number of requests deferred", state["waiting"]),
        ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", 1.5),
    ]
    lines = []
    for kind, items in (("counter", counters), ("gauge", gauges)):
        for name, doc, value in items:
            full = f"llamacpp:{name}"
            lines += [f"# HELP {full} {doc}", f"# TYPE {full} {kind}", f"{full} {num(value)}"]
    return "\n".join(lines) + "\n"


def _slots() -> list[dict[str, object]]:
    """llama-server's GET /slots at the second scrape (server_slot::to_json, only_metrics): 2 slots of 8192,
    one mid-reply (prompt 512, 64 decoded), one holding a finished reply's tokens (512 + 129)."""
    def slot(i: int, decoded: int, busy: bool) -> dict[str, object]:
        return {"id": i, "n_ctx": KV_CAPACITY // 2, "speculative": False, "is_processing": busy, "id_task": 7 + i,
                "n_prompt_tokens": 512, "n_prompt_tokens_processed": 384, "n_prompt_tokens_cache": 128,
                "params": {"n_predict": 256},
                "next_token": [{"has_next_token": busy, "has_new_line": False, "n_remain": 256 - decoded,
                                "n_decoded": decoded}]}
    return [slot(0, 64, True), slot(1, 129, False)]


def _ollama() -> dict[str, str]:
    r = RECENT[0]
    chat = {"model": "llama3.1:8b", "created_at": "2026-12-01T10:00:00.000000Z",
            "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": True,
            "total_duration": int((r.prefill_s + r.decode_s + 0.1) * 1e9), "load_duration": 100_000_000,
            "prompt_eval_count": r.prompt, "prompt_eval_duration": int(r.prefill_s * 1e9),
            "eval_count": r.generated, "eval_duration": int(r.decode_s * 1e9)}  # all its tokens, n - 1 steps
    ps = {"models": [{"name": "llama3.1:8b", "model": "llama3.1:8b", "size": 6_654_289_920,
                      "digest": "46e0c10c039e019119339687c3c1757cc81b9da49709a3b3924863ba87ca666e",
                      "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                                  "parameter_size": "8.0B", "quantization_level": "Q4_K_M"},
                      "expires_at": "2026-12-01T10:05:00.000000Z", "size_vram": 6_654_289_920,
                      "context_length": KV_CAPACITY}]}
    return {"llama-server-slots.json": json.dumps(_slots(), indent=1) + "\n",
            "ollama-chat.json": json.dumps(chat, indent=1) + "\n", "ollama-ps.json": json.dumps(ps, indent=1) + "\n",
            "ollama-version.json": json.dumps({"version": "0.13.0"}) + "\n"}


def recordings() -> dict[str, str]:
    files: dict[str, str] = {}
    for phase, requests, state in (("a", EARLY, STATE_A), ("b", EARLY + RECENT, STATE_B)):
        files[f"vllm-{phase}.prom"] = _vllm(requests, state, v0=False)
        files[f"vllm-v0-{phase}.prom"] = _vllm(requests, state, v0=True)
        files[f"sglang-{phase}.prom"] = _sglang(requests, state)
        files[f"trtllm-{phase}.prom"] = _trtllm(requests, state)
        files[f"llama-server-{phase}.prom"] = _llama_server(requests, state)
    files.update(_ollama())
    return files


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in recordings().items():
        (OUT / name).write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {len(recordings())} files to {OUT}\n")
