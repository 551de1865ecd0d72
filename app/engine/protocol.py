"""Typed messages between the app and the engine process, sent as JSON lines.

Commands go to the engine (load, generate, cancel, unload, bench, stats, shutdown); events come back
(loaded, token, prefilled, done, error, stats, bench_result, progress). Every message is a dataclass with a
`type` tag; `encode`/`decode` turn them into one line of JSON. JSON (not pickle) keeps the stream inspectable
and safe to parse even if the other side is broken.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core.config.defaults import DEFAULT_N_CTX
from app.core.sampling import defaults as D

# ---------------------------------------------------------------- commands (app -> engine)


@dataclass
class LoadConfig:
    model_path: str
    n_ctx: int = DEFAULT_N_CTX
    n_threads: int | None = None  # None: llama.cpp's default (physical cores)
    n_threads_batch: int | None = None
    n_gpu_layers: int = 0  # -1: all layers
    n_cpu_moe: int = 0  # MoE: the expert matrices of the first N blocks stay in CPU memory (--n-cpu-moe)
    # a GPU is expected (a driver reports one, or the user set GPU layers): n_gpu_layers stands even when the
    # build finds no device, so placing fewer layers is said; otherwise "all" means "all the build can"
    gpu_expected: bool = False
    n_batch: int = 512
    n_ubatch: int = 512
    type_k: str = "f16"  # f16 | q8_0 | q4_0
    type_v: str = "f16"
    flash_attn: bool | None = None  # None: off, unless the V cache is quantized (llama.cpp then needs it on)
    swa_full: bool = True  # llama-cpp-python's default: full-size sliding-window cache
    seed: int = -1
    chat_template: str | None = None  # override; None = GGUF's own or one chosen from the architecture
    # read the weights into memory (llama.cpp's --no-mmap): decode 12 % faster on one thread, 5 % on two on the
    # default model, and a repacked Q4 tensor is held once (docs/bench/2026-12-01-reliability-findings.md)
    use_mmap: bool = False
    draft_model: str | None = None  # a small model with the same vocabulary for speculative decoding
    draft_max: int = 8  # most tokens it drafts per step
    warmup: bool = True  # a short uncounted decode after loading, so the first reply is not measured cold
    # Saved KV of conversations (app.core.chat.saved_kv): the folder for the states, None: none saved or restored
    kv_store_dir: str | None = None
    kv_store_budget_mib: int = 2048  # the folder's most; least recently used states go first; 0: off
    # States up to this size are written right after each reply; a bigger one (a long chat of a big model: a
    # write of hundreds of MB) waits until the chat is left: another chat's turn, a load, unload or shutdown.
    kv_save_eager_mib: int = 64


@dataclass
class Sampling:
    temperature: float = D.TEMPERATURE
    top_p: float = D.TOP_P
    top_k: int = D.TOP_K
    min_p: float = D.MIN_P
    repeat_penalty: float = D.REPEAT_PENALTY
    max_tokens: int = D.MAX_TOKENS
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False  # benchmarks: always produce max_tokens
    # OpenAI's: a token's logit minus (its count in the reply so far) × frequency_penalty, minus presence_penalty
    # once it occurs at all (`roofline serve`'s batch engine applies them)
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0


@dataclass
class Load:
    type: ClassVar[str] = "load"
    config: LoadConfig


@dataclass
class Generate:
    """Either `messages` (chat, templated in the engine) or `prompt` (raw text continuation)."""

    type: ClassVar[str] = "generate"
    request_id: str
    messages: list[dict[str, Any]] | None = None  # role, content (an assistant's tool_calls, a tool_call_id)
    prompt: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    prompt_lookup: bool = False  # speculative prompt-lookup decoding
    # Token events leave the engine in bursts this many ms apart (None: the engine's 25 ms). The window asks
    # for its own redraw interval: sending more often only wakes it, and on a busy CPU each wake-up is decode
    # time lost.
    stream_interval_ms: int | None = None
    # The batch engine reuses a cached prefix only for a request with the same salt (vLLM's cache_salt):
    # another client can neither reuse nor learn, from cached_tokens, what a prompt started with.
    cache_salt: str = ""
    # Chat replies: thinking (`<think>…</think>`, or a prompt that opens it) goes to Token/Done.reasoning and
    # the answer alone to .text. Raw prompts (continuations) are never split.
    split_reasoning: bool = True
    # A full context: "stop" (end the reply, finish_reason context_full), "truncate-middle" (cut the middle
    # of a too-long prompt) or "rolling" (also shift the KV cache mid-reply and go on);
    # app.engine.llama.context_overflow.
    context_overflow: str = "stop"
    n_keep: int | None = None  # tokens at the start that overflow never drops (None: system + first turn)
    # The chat this request belongs to: its KV cache is saved after the reply and restored from disk when a
    # later prompt starts with what was saved (LoadConfig.kv_store_dir). None: nothing saved.
    conversation_id: str | None = None
    # The output must match this grammar (app.core.sampling.constraint.GrammarSpec.to_wire(): a JSON schema,
    # any JSON object, Lark or a regex), enforced while sampling. None: free text.
    grammar: dict[str, str] | None = None
    # Log-probabilities of each reply token with this many alternatives (0-20) in Done.metrics["logprobs"] and
    # on each Token; None: none computed.
    logprobs: int | None = None
    # OpenAI's `tools` (function definitions), rendered through the model's own chat template.
    tools: list[dict[str, Any]] | None = None
    # Text the reply starts with, written after the generation prompt (a forced tool call's opening: tool_choice
    # required / named, app.core.chat.tool_choice); the reply's text is what comes after it.
    assistant_prefix: str = ""
    # Reply text with the special tokens' text in it (a tool call's markers: [TOOL_CALLS], <|channel|> ...).
    special_text: bool = False

    def prompt_bytes(self) -> int:
        """The prompt's UTF-8 length before any template (a chat's message contents, tool calls and tools added
        up): a bound checked before tokenizing."""
        if self.messages is None:
            return len((self.prompt or "").encode("utf-8"))
        size = sum(len(str(m.get("content") or "").encode("utf-8")) for m in self.messages)
        extra = [m["tool_calls"] for m in self.messages if m.get("tool_calls")] + ([self.tools] if self.tools else [])
        return size + sum(len(json.dumps(x, ensure_ascii=False).encode("utf-8")) for x in extra)


@dataclass
class Cancel:
    type: ClassVar[str] = "cancel"
    request_id: str


@dataclass
class Unload:
    type: ClassVar[str] = "unload"


@dataclass
class GetStats:
    type: ClassVar[str] = "get_stats"


@dataclass
class Bench:
    """llama-bench style: pp (n_prompt random tokens, n_gen 0) or tg (n_gen single-token decodes)."""

    type: ClassVar[str] = "bench"
    request_id: str
    n_prompt: int = 0
    n_gen: int = 0
    n_depth: int = 0
    repetitions: int = 5
    warmup: bool = True


@dataclass
class Shutdown:
    type: ClassVar[str] = "shutdown"


# ---------------------------------------------------------------- events (engine -> app)


@dataclass
class Ready:
    """Sent once at start-up: the engine process runs and llama.cpp imported."""

    type: ClassVar[str] = "ready"
    pid: int
    llama_cpp_version: str
    system_info: str
    gpu_offload: bool
    cpu_backend: str = ""  # the ggml CPU variant in use and its library, e.g. "haswell (libggml-cpu-haswell.so)"
    devices: list[dict[str, Any]] = field(default_factory=list)  # hardware.LlamaDevice fields, llama.cpp's order
    backends: list[str] = field(default_factory=list)  # the build's ggml backends: "CPU", "Vulkan", "CUDA"


@dataclass
class Progress:
    type: ClassVar[str] = "progress"
    stage: str
    fraction: float


@dataclass
class Loaded:
    type: ClassVar[str] = "loaded"
    model_path: str
    load_ms: float
    n_ctx: int  # what llama.cpp actually allocated (it pads)
    n_ctx_train: int
    n_vocab: int
    n_params: int
    model_size: int  # bytes of tensors
    architecture: str
    model_desc: str
    chat_template_name: str
    chat_template_source: str  # "gguf" | "architecture" | "override" | "none"
    n_gpu_layers: int
    type_k: str
    type_v: str
    flash_attn: bool | None
    swa_full: bool
    buffers_mib: dict[str, float]  # from llama.cpp's own log lines: model, kv, compute (per device)
    kv_bytes_allocated: int
    kv_cells_allocated: int
    n_threads: int
    n_threads_batch: int
    rss_bytes: int
    metadata: dict[str, str] = field(default_factory=dict)
    tool_format: str = ""  # the family whose tool calls the chat template writes (tool_formats); "": no tools
    # LoadConfig.n_gpu_layers as asked (-1: all) when a GPU is expected or the build can offload, else 0
    gpu_layers_requested: int = 0
    gpu_layers_placed: int | None = None  # layers (and the output) llama.cpp put on a GPU, from its load log
    gpu_layers_total: int | None = None  # of how many (the repeating layers and the output)


@dataclass
class Token:
    type: ClassVar[str] = "token"
    request_id: str
    text: str
    index: int
    t: float  # engine's monotonic time of this token (seconds)
    reasoning: str = ""  # thinking text in this piece (text is then the answer part, often "")
    logprobs: list[dict[str, Any]] | None = None  # Generate.logprobs asked: this token's, in OpenAI's chat form


@dataclass
class Prefilled:
    """Sent with a reply's first token: the prefill phase is over, so its numbers are final already."""

    type: ClassVar[str] = "prefilled"
    request_id: str
    prompt_tokens: int
    prefill_tokens: int  # evaluated now; the rest were reused from the KV cache
    prefill_ms: float  # llama.cpp's compute time for them
    ttft_ms: float  # wall clock, request received -> first token
    kv_cells_used: int
    kv_bytes_used: int
    kv_bytes_per_cell: float  # what each further token adds (full-attention caches; 0: unknown)
    # a saved KV cache loaded from disk instead of prefilling (app.core.chat.saved_kv); 0/"" when none was
    restored_tokens: int = 0
    restore_ms: float = 0.0
    restore_prefill_ms: float = 0.0  # what prefilling the restored tokens would have taken (estimate)
    restore_note: str = ""  # why a saved state was not used

    @property
    def prefill_tps(self) -> float:
        return 1000.0 * self.prefill_tokens / self.prefill_ms if self.prefill_ms > 0 else 0.0


@dataclass
class PrefillProgress:
    """Sent after each chunk (n_batch tokens) of a long prompt's prefill, before the first token: how far it
    is. The app shows the share done and the time left from the rate so far (llama-server's return_progress)."""

    type: ClassVar[str] = "prefill_progress"
    request_id: str
    done: int  # prompt tokens evaluated so far in this prefill
    total: int  # prompt tokens this prefill evaluates (reused ones apart)
    elapsed_ms: float  # since the prefill began

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total > 0 else 1.0

    @property
    def left_ms(self) -> float | None:
        """The time left at the rate so far; None before a chunk is done."""
        if self.done <= 0 or self.elapsed_ms <= 0:
            return None
        return self.elapsed_ms * (self.total - self.done) / self.done


@dataclass
class Done:
    type: ClassVar[str] = "done"
    request_id: str
    text: str
    finish_reason: str  # stop | length | cancelled | context_full
    metrics: dict[str, Any]  # PhaseMetrics.to_dict()
    reasoning: str = ""  # the thinking, apart from the answer in `text`


@dataclass
class Error:
    type: ClassVar[str] = "error"
    request_id: str | None
    kind: str  # engine_died | load_failed | bad_request | generation_failed | protocol | timeout
    message: str
    fatal: bool = False  # True: the engine process is gone; start a new one


@dataclass
class Stats:
    type: ClassVar[str] = "stats"
    rss_bytes: int
    kv_cells_used: int
    kv_cells_allocated: int
    kv_bytes_used: int
    kv_bytes_allocated: int
    loaded: bool
    # the short uncounted decode the engine ran right after sending Loaded (pages the weights in, starts
    # llama.cpp's threads), so the first reply is not measured cold; 0: none ran
    warmup_ms: float = 0.0
    devices: list[dict[str, Any]] = field(default_factory=list)  # GPUs llama.cpp offloads to, memory read now


@dataclass
class BenchResult:
    type: ClassVar[str] = "bench_result"
    request_id: str
    n_prompt: int
    n_gen: int
    n_depth: int
    samples_ns: list[int]
    n_threads: int
    model_info: dict[str, Any]


Command = Load | Generate | Cancel | Unload | GetStats | Bench | Shutdown
Event = Ready | Progress | Loaded | Token | Prefilled | PrefillProgress | Done | Error | Stats | BenchResult

_TYPES: dict[str, type] = {
    cls.type: cls  # type: ignore[attr-defined]
    for cls in (Load, Generate, Cancel, Unload, GetStats, Bench, Shutdown,
                Ready, Progress, Loaded, Token, Prefilled, PrefillProgress, Done, Error, Stats, BenchResult)
}
_NESTED: dict[tuple[str, str], type] = {("load", "config"): LoadConfig, ("generate", "sampling"): Sampling}


class ProtocolError(ValueError):
    """A line that is not a valid message."""


def encode(msg: Any) -> str:
    data = dataclasses.asdict(msg)
    data["type"] = msg.type
    return json.dumps(data, separators=(",", ":"))


def decode(line: str | bytes) -> Any:
    try:
        data = json.loads(line)
        tag = data.pop("type")
        cls = _TYPES[tag]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProtocolError(f"not a protocol message: {str(line)[:200]!r}") from exc
    for (owner, name), nested in _NESTED.items():
        if owner == tag and isinstance(data.get(name), dict):
            data[name] = nested(**data[name])
    try:
        return cls(**data)
    except TypeError as exc:
        raise ProtocolError(f"bad fields for {tag}: {exc}") from exc
