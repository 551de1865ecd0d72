"""What a request asks of its output besides the text: `response_format` (structured output), `logprobs` and
`top_logprobs`, `echo`: validated from the body, and shaped back into OpenAI's response fields.

- `response_format`: `{"type": "text"}` (the default), `{"type": "json_object"}` (any JSON object) or
  `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`; both JSON types are enforced while
  sampling (app.core.sampling.constraint), strict or not: the schema's JSON is the only output the sampler can
  draw. llama-server's `{"type": "json_object", "schema": {...}}` is read as a schema too. A schema the grammar
  engine cannot compile is a 400 naming the reason.
- Chat: `logprobs: true` and `top_logprobs` 0-20 give `choices[].logprobs.content[]`; completions: `logprobs`
  0-20 gives the legacy `tokens` / `token_logprobs` / `top_logprobs` / `text_offset` lists. Values come from the
  model's logits row before penalties and mask (app.core.sampling.logprobs).
- `echo` (completions): the prompt is prepended to the text. With `logprobs` it is a 400: the prompt's own
  tokens are evaluated in batches that keep no logits, so their log-probabilities do not exist to return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.sampling.constraint import GrammarSpec
from app.core.sampling.logprobs import MAX_TOP_LOGPROBS


class OptionError(ValueError):
    """A bad output option: (message, param) for the 400."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class OutputOptions:
    grammar: GrammarSpec | None = None
    logprobs: int | None = None  # how many alternatives per token; None: no log-probabilities
    echo: bool = False


def _response_format(body: dict[str, Any]) -> GrammarSpec | None:
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise OptionError("'response_format' must be an object with a 'type'.", "response_format")
    kind = fmt["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        schema = fmt.get("schema")  # llama-server's extension
        spec = GrammarSpec.json_object() if schema is None else _schema_spec(schema, "response_format.schema")
    elif kind == "json_schema":
        js = fmt.get("json_schema")
        if not isinstance(js, dict):
            raise OptionError("'response_format.json_schema' must be an object with a 'schema'.", "response_format")
        schema = js.get("schema", {"type": "object"})  # OpenAI: a missing schema means any object
        spec = _schema_spec(schema, "response_format.json_schema.schema")
    else:
        raise OptionError(f"'response_format.type' must be text, json_object or json_schema; got {kind!r}.",
                          "response_format")
    problem = spec.problem()
    if problem:
        raise OptionError(f"The response_format schema cannot be enforced: {problem}", "response_format")
    return spec


def _schema_spec(schema: Any, where: str) -> GrammarSpec:
    if not isinstance(schema, dict):
        raise OptionError(f"'{where}' must be a JSON Schema object.", "response_format")
    return GrammarSpec.json_schema(schema)


def _top(body: dict[str, Any], name: str) -> int:
    value = body.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS:
        raise OptionError(f"'{name}' must be an integer from 0 to {MAX_TOP_LOGPROBS}.", name)
    return value


def parse_output_options(body: dict[str, Any], chat: bool) -> OutputOptions:
    grammar = _response_format(body)
    if chat:
        wants = body.get("logprobs")
        if wants is not None and not isinstance(wants, bool):
            raise OptionError("'logprobs' must be true or false.", "logprobs")
        top = _top(body, "top_logprobs")
        if top and not wants:
            raise OptionError("'top_logprobs' needs 'logprobs': true.", "top_logprobs")
        return OutputOptions(grammar, top if wants else None)
    echo = body.get("echo", False)
    if echo is not None and not isinstance(echo, bool):
        raise OptionError("'echo' must be true or false.", "echo")
    logprobs = None if body.get("logprobs") is None else _top(body, "logprobs")
    if echo and logprobs is not None:
        raise OptionError("'echo' with 'logprobs' is not supported: the prompt's tokens have no log-probabilities "
                          "here. Ask for one or the other.", "echo")
    return OutputOptions(grammar, logprobs, bool(echo))


def response_logprobs(options: OutputOptions, chat: bool, entries: list[dict[str, Any]] | None,
                      text_offset: int = 0) -> dict[str, Any] | None:
    """A choice's `logprobs` from the engine's per-token entries (app.core.sampling.logprobs.logprob_entry);
    None when the request did not ask. `text_offset` is where the reply's text starts in the choice's text."""
    if options.logprobs is None:
        return None
    items = entries or []
    if chat:
        return {"content": items, "refusal": None}
    offsets, at = [], text_offset
    for item in items:
        offsets.append(at)
        at += len(item["token"])
    return {"tokens": [i["token"] for i in items], "token_logprobs": [i["logprob"] for i in items],
            "top_logprobs": [{t["token"]: t["logprob"] for t in i["top_logprobs"]} for i in items],
            "text_offset": offsets}
