"""Which metric means what, per serving engine: the one home of the engines' names, read from their sources.

Each role lists candidate names, newest first; the first one a scrape holds is read, so one spec covers an
engine's versions. Sources (file, and the version differences each spec covers):

- vLLM, `vllm/v1/metrics/loggers.py` (PrometheusStatLogger) and `vllm/v1/spec_decode/metrics.py`
  (SpecDecodingProm); served at /metrics. 0.9 renamed `vllm:gpu_cache_usage_perc` to `vllm:kv_cache_usage_perc`
  and `vllm:gpu_prefix_cache_queries`/`_hits` to `vllm:prefix_cache_queries`/`_hits` (both exposed until the
  old ones were hidden); 0.11 added `vllm:inter_token_latency_seconds` (one observation per token) and
  `vllm:request_time_per_output_token_seconds` (one per request), deprecating
  `vllm:time_per_output_token_seconds`, which was the per-token one: it is read as ITL where ITL is missing.
  The V0 engine (`vllm/engine/metrics.py`, up to 0.10) had `vllm:gpu_cache_usage_perc`, the per-token
  `vllm:time_per_output_token_seconds`, `vllm:num_preemptions_total` and hit-rate gauges
  (`vllm:gpu_prefix_cache_hit_rate`, `vllm:spec_decode_draft_acceptance_rate`) instead of counters.
- SGLang, `python/sglang/srt/metrics/collector.py` (SchedulerMetricsCollector, TokenizerMetricsCollector);
  /metrics with --enable-metrics. No prefill or decode time histograms: the per-request decode rate comes from
  the ITL histogram's mean; its ITL buckets count tokens (observe_inter_token_latency adds num_new_tokens).
- TensorRT-LLM, `tensorrt_llm/metrics/collector.py` (MetricsCollector, prefix `trtllm_`); served at
  /prometheus/metrics by `trtllm-serve`. KV use in blocks (used, max, tokens per block) and a utilization
  gauge; `trtllm_time_per_output_token_seconds` is per request, the nearest it has to ITL. The per-request
  histograms and counters are written only with `return_perf_metrics: true` in the LLM arguments.
- llama-server, `tools/server/server-task.cpp` (server_task_result_metrics::to_json's counters and gauges;
  server.cpp before the split); /metrics with --metrics. Counters of prompt and predicted tokens and their
  seconds, requests processing and deferred, n_tokens_max, the spec-decode counters; no KV gauge (the old
  `llamacpp:kv_cache_usage_ratio` and `llamacpp:kv_cache_tokens` were dropped) and no histograms. Newer
  versions count cached prompt tokens apart (`llamacpp:prompt_tokens_cached_total`, with
  `prompt_tokens_total` then "excluding cached tokens"): its prefill rate is of the tokens it evaluated. Its
  KV use comes from GET /slots (--slots: each slot's n_ctx, prompt tokens and tokens decoded).
  `roofline serve` (app/server/metrics.py) writes llama-server's names plus those two KV gauges and TTFT and
  ITL histograms: the same spec reads both, `llamacpp:engine_restarts_total` tells them apart.
- Ollama, `api/types.go`: no /metrics at all; read from replies and /api/ps (app.core.remote.ollama).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VLLM, SGLANG, TRTLLM, LLAMA, OLLAMA = "vllm", "sglang", "trtllm", "llama-server", "ollama"
ENGINES = (VLLM, SGLANG, TRTLLM, LLAMA, OLLAMA)
LABELS = {VLLM: "vLLM", SGLANG: "SGLang", TRTLLM: "TensorRT-LLM", LLAMA: "llama-server", OLLAMA: "Ollama"}
ROOFLINE_LABEL = "roofline serve"
ROOFLINE_ONLY = "llamacpp:engine_restarts_total"

Names = tuple[str, ...]
Pairs = tuple[tuple[str, str], ...]  # (tokens counter, seconds counter)


@dataclass(frozen=True)
class EngineSpec:
    key: str
    prefix: str
    metrics_path: str
    ttft: Names = ()  # histograms in seconds
    itl: Names = ()
    prefill_time: Names = ()  # per request
    decode_time: Names = ()
    queue_time: Names = ()
    prompt_tokens: Names = ()  # counters: aggregate throughput over the window
    generation_tokens: Names = ()
    prefill_rate: Pairs = ()  # per-request rates: tokens over the seconds spent on them
    decode_rate: Pairs = ()
    requests_finished: Names = ()  # a count of finished requests beside decode_rate (n tokens, n - 1 steps)
    kv_fraction: Names = ()  # gauge 0..1
    kv_tokens: Names = ()
    kv_capacity: Names = ()
    kv_blocks: tuple[str, str, str] | None = None  # (used blocks, max blocks, tokens per block)
    prefix_hits: Pairs = ()  # (hit tokens counter, queried tokens counter)
    prefix_hits_misses: Pairs = ()  # (hit tokens counter, evaluated tokens counter): hits over their sum
    prefix_hit_gauge: Names = ()
    running: Names = ()
    waiting: Names = ()
    preemptions: Names = ()
    spec_pairs: Pairs = ()  # (accepted tokens counter, draft tokens counter)
    spec_gauge: Names = ()

    @property
    def label(self) -> str:
        return LABELS[self.key]


SPECS: dict[str, EngineSpec] = {
    VLLM: EngineSpec(
        VLLM, "vllm:", "/metrics",
        ttft=("vllm:time_to_first_token_seconds",),
        itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        prefill_time=("vllm:request_prefill_time_seconds",),
        decode_time=("vllm:request_decode_time_seconds",),
        queue_time=("vllm:request_queue_time_seconds",),
        prompt_tokens=("vllm:prompt_tokens_total",),
        generation_tokens=("vllm:generation_tokens_total",),
        prefill_rate=(("vllm:request_prompt_tokens_sum", "vllm:request_prefill_time_seconds_sum"),),
        decode_rate=(("vllm:request_generation_tokens_sum", "vllm:request_decode_time_seconds_sum"),),
        requests_finished=("vllm:request_decode_time_seconds_count",),
        kv_fraction=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        prefix_hits=(("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
                     ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total")),
        prefix_hit_gauge=("vllm:gpu_prefix_cache_hit_rate",),  # the V0 engine's
        running=("vllm:num_requests_running",),
        waiting=("vllm:num_requests_waiting",),
        preemptions=("vllm:num_preemptions_total",),
        spec_pairs=(("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"),),
        spec_gauge=("vllm:spec_decode_draft_acceptance_rate",),  # the V0 engine's
    ),
    SGLANG: EngineSpec(
        SGLANG, "sglang:", "/metrics",
        ttft=("sglang:time_to_first_token_seconds",),
        itl=("sglang:inter_token_latency_seconds",),
        queue_time=("sglang:queue_time_seconds",),
        prompt_tokens=("sglang:prompt_tokens_total",),
        generation_tokens=("sglang:generation_tokens_total",),
        kv_fraction=("sglang:token_usage",),
        kv_tokens=("sglang:num_used_tokens",),
        kv_capacity=("sglang:max_total_num_tokens",),
        prefix_hits=(("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),),
        prefix_hit_gauge=("sglang:cache_hit_rate",),
        running=("sglang:num_running_reqs",),
        waiting=("sglang:num_queue_reqs",),
        preemptions=("sglang:num_retracted_requests_total",),
        spec_gauge=("sglang:spec_accept_rate",),
    ),
    TRTLLM: EngineSpec(
        TRTLLM, "trtllm_", "/prometheus/metrics",
        ttft=("trtllm_time_to_first_token_seconds",),
        itl=("trtllm_time_per_output_token_seconds",),
        prefill_time=("trtllm_request_prefill_time_seconds",),
        decode_time=("trtllm_request_decode_time_seconds",),
        queue_time=("trtllm_request_queue_time_seconds",),
        prompt_tokens=("trtllm_prompt_tokens_total",),
        generation_tokens=("trtllm_generation_tokens_total",),
        prefill_rate=(("trtllm_prompt_tokens_total", "trtllm_request_prefill_time_seconds_sum"),),
        decode_rate=(("trtllm_generation_tokens_total", "trtllm_request_decode_time_seconds_sum"),),
        requests_finished=("trtllm_request_decode_time_seconds_count",),
        kv_fraction=("trtllm_kv_cache_utilization",),
        kv_blocks=("trtllm_kv_cache_used_blocks", "trtllm_kv_cache_max_blocks", "trtllm_kv_cache_tokens_per_block"),
        prefix_hits=(("trtllm_prompt_cached_tokens_total", "trtllm_prompt_tokens_total"),),
        prefix_hit_gauge=("trtllm_kv_cache_hit_rate",),
        running=("trtllm_num_requests_running",),
        waiting=("trtllm_num_requests_waiting",),
        spec_pairs=(("trtllm_spec_decode_num_accepted_tokens_total", "trtllm_spec_decode_num_draft_tokens_total"),),
    ),
    LLAMA: EngineSpec(
        LLAMA, "llamacpp:", "/metrics",
        ttft=("llamacpp:time_to_first_token_seconds",),  # roofline serve's
        itl=("llamacpp:inter_token_latency_seconds",),  # roofline serve's
        prompt_tokens=("llamacpp:prompt_tokens_total",),
        generation_tokens=("llamacpp:tokens_predicted_total",),
        prefill_rate=(("llamacpp:prompt_tokens_total", "llamacpp:prompt_seconds_total"),),
        decode_rate=(("llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total"),),
        kv_fraction=("llamacpp:kv_cache_usage_ratio",),  # roofline serve's (llama-server dropped it)
        kv_tokens=("llamacpp:kv_cache_tokens",),
        prefix_hits_misses=(("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total"),),
        running=("llamacpp:requests_processing",),
        waiting=("llamacpp:requests_deferred",),
        spec_pairs=(("llamacpp:spec_decode_num_accepted_tokens_total",
                     "llamacpp:spec_decode_num_draft_tokens_total"),),
    ),
}


def spec_for(engine: str) -> EngineSpec | None:
    return SPECS.get(engine)


def engine_from_names(names: set[str]) -> str | None:
    """The engine whose prefix most of the scrape's names carry (a process may export a few of another's)."""
    counts = {key: sum(1 for n in names if n.startswith(spec.prefix)) for key, spec in SPECS.items()}
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else None


def engine_from_answer(path: str, body: Any) -> str | None:
    """The engine an answer to GET `path` shows: Ollama's /api/version ({"version": ...}), llama-server's
    /props (its generation settings and slots). vLLM's and SGLang's /version look alike, so the metrics'
    prefixes tell those apart, not this."""
    if not isinstance(body, dict):
        return None
    if path == "/api/version" and isinstance(body.get("version"), str):
        return OLLAMA
    if path == "/props" and ("default_generation_settings" in body or "total_slots" in body):
        return LLAMA
    return None


def label_for(engine: str, names: set[str] | None = None) -> str:
    """The engine's name for the cards ("vLLM"), `roofline serve` told apart from llama-server."""
    if engine == LLAMA and names and ROOFLINE_ONLY in names:
        return ROOFLINE_LABEL
    return LABELS.get(engine, engine)
