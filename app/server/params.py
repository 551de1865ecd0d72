"""Which request fields each endpoint takes: the one home of what `roofline serve` supports.

Every field of a request body is one of four kinds, per endpoint:
- implemented: its handler reads and applies it;
- elsewhere: a field another module of the server validates and applies itself (tool calls, structured
  output, log probabilities); this check lets it through to them;
- neutral only: a field we do not implement, accepted only when its value asks for nothing (null, or the
  value that means the default, such as `n: 1` or `logit_bias: {}`): clients send those unasked;
- informational: a field that never changes a reply (`user`, `metadata`): accepted and documented as such.

Anything else, an OpenAI field we do not implement or a name nobody defines, is a 400 that names it:
nothing is silently ignored (a client that asks for `logit_bias` and gets a reply without it would
believe it had worked).
"""

from __future__ import annotations

from typing import Any

# llama-server's sampling extras and vLLM's cache_salt, taken by every generating endpoint
SAMPLING = frozenset({"temperature", "top_p", "top_k", "min_p", "seed", "stop", "repeat_penalty", "ignore_eos",
                      "frequency_penalty", "presence_penalty", "max_tokens", "cache_salt", "stream"})

IMPLEMENTED: dict[str, frozenset[str]] = {
    "chat": SAMPLING | {"model", "messages", "n", "max_completion_tokens", "stream_options"},
    "completions": SAMPLING | {"model", "prompt", "n", "stream_options"},
    "embeddings": frozenset({"model", "input", "encoding_format"}),
    "infill": SAMPLING | {"model", "input_prefix", "input_suffix", "input_extra", "prompt", "n_predict",
                          "stream_options"},
    "messages": frozenset({"model", "messages", "max_tokens", "system", "stop_sequences", "stream",
                           "temperature", "top_p", "top_k"}),
}

# validated and applied by the tool-call and structured-output modules (their own 400s)
ELSEWHERE: dict[str, frozenset[str]] = {
    "chat": frozenset({"tools", "tool_choice", "parallel_tool_calls", "response_format", "logprobs",
                       "top_logprobs"}),
    "completions": frozenset({"logprobs", "echo", "response_format"}),  # llama-server takes a schema here too
    "embeddings": frozenset(),
    "infill": frozenset(),
    "messages": frozenset(),
}

# never change a reply: who the end user is, labels for a store we do not keep
INFORMATIONAL: dict[str, frozenset[str]] = {
    # the prompt_cache_* hints steer OpenAI's cache; ours is each slot's own (see cache_salt)
    "chat": frozenset({"user", "metadata", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
                       "prompt_cache_options"}),
    "completions": frozenset({"user"}),
    "embeddings": frozenset({"user"}),
    "infill": frozenset(),
    # cache_control marks prompt-cache breakpoints; ours caches every slot's prefix anyway
    "messages": frozenset({"metadata", "cache_control", "inference_geo", "user_profile_id", "workspace_id",
                           "diagnostics"}),
}

_ANY = object()
# not implemented: accepted only with these values (null always is), which ask for nothing
NEUTRAL: dict[str, dict[str, tuple[Any, ...]]] = {
    "chat": {"logit_bias": ({},), "store": (False,), "modalities": (["text"],), "service_tier": ("auto", "default"),
             "audio": (), "prediction": (), "reasoning_effort": (), "verbosity": (), "web_search_options": (),
             "moderation": (), "functions": (), "function_call": ("none",)},
    "completions": {"logit_bias": ({},), "best_of": (1,), "suffix": ("",)},
    "embeddings": {"dimensions": ()},
    "infill": {},
    "messages": {"tools": ([],), "tool_choice": (), "thinking": ({"type": "disabled"},), "service_tier": ("auto",),
                 "container": (), "mcp_servers": ([],), "output_config": (), "speed": ()},
}

WHY: dict[str, str] = {  # what to say instead of only "not supported", where there is something to say
    "functions": "use 'tools' instead (the deprecated functions API is not served)",
    "function_call": "use 'tool_choice' instead (the deprecated functions API is not served)",
    "logit_bias": "the sampler takes no per-token bias",
    "best_of": "one completion is generated per request",
    "suffix": "use POST /infill (input_prefix, input_suffix) for fill-in-the-middle",
    "dimensions": "the model's embeddings have one fixed size",
    "audio": "the model is text only", "modalities": "the model is text only",
    "tools": "tool use is not served on the Messages API", "tool_choice": "tool use is not served on the Messages API",
    "thinking": "extended thinking is not served on the Messages API",
}


class UnsupportedField(ValueError):
    """A field the endpoint does not take, or takes only with another value: `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def known(endpoint: str) -> frozenset[str]:
    """Every field `endpoint` accepts in some form."""
    return (IMPLEMENTED[endpoint] | ELSEWHERE[endpoint] | INFORMATIONAL[endpoint]
            | frozenset(NEUTRAL[endpoint]))


def check_fields(body: dict[str, Any], endpoint: str) -> None:
    """Raise UnsupportedField for the first field of `body` that `endpoint` cannot honour."""
    accepted = IMPLEMENTED[endpoint] | ELSEWHERE[endpoint] | INFORMATIONAL[endpoint]
    neutral = NEUTRAL[endpoint]
    for name in sorted(body):
        value = body[name]
        if name in accepted or value is None:
            continue
        if name in neutral:
            if value in neutral[name]:
                continue
            why = WHY.get(name, "it is not implemented")
            allowed = " or ".join(repr(v) for v in neutral[name])
            raise UnsupportedField(name, f"'{name}' is not supported here ({why})"
                                         + (f"; only {allowed} or null is accepted." if allowed else "."))
        raise UnsupportedField(name, f"Unknown parameter '{name}': this endpoint does not take it "
                                     f"(see docs/serve.md for the fields it does).")
