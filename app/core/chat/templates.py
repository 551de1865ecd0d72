"""Chat prompt formatting: the GGUF's own Jinja template when it has one, else a built-in format chosen
from the architecture (Gemma turns for `gemma3`, ChatML for Qwen, ...).

GGUF templates are untrusted input: they are rendered in a bounded Jinja sandbox (app/core/chat/template_sandbox.py),
so a template cannot reach Python internals (attribute walks like `''.__class__.__mro__` raise SecurityError),
and a step budget, a CPU-time budget and size checks on every string-building operation stop a template that
spins or allocates, even one that never yields any output.

Some templates refuse a system message (Gemma 2 raises "System role not supported") or drop it silently.
Like llama.cpp (minja's system-role polyfill) and LM Studio, such a template gets the system prompt folded
into the first user turn instead: whether a template keeps a system message is probed once per template.

Tools (OpenAI's `tools`, an assistant's `tool_calls`, `tool` results) go through the template's own `tools`
variable and messages, as `transformers` renders them, prepared for what the template handles
(app/core/chat/template_tools.py); a template without tool support, or a built-in format, refuses them.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

from jinja2.exceptions import SecurityError, TemplateError

from app.core.chat import template_tools
from app.core.chat.template_budget import end_budget, start_budget
from app.core.chat.template_compile import TemplateTooBig
from app.core.chat.template_sandbox import BoundedSandbox

Message = dict[str, Any]  # role, content; an assistant's tool_calls, a tool result's tool_call_id


class ChatTemplateError(ValueError):
    """The chat template could not be rendered (broken or hostile template)."""


def _gemma(messages: list[Message], bos: str) -> str:
    # Gemma has no system role: the system prompt is prepended to the first user turn.
    out = [bos]
    system = ""
    for m in messages:
        if m["role"] == "system":
            system += m["content"] + "\n\n"
            continue
        role = "model" if m["role"] == "assistant" else "user"
        content = m["content"]
        if role == "user" and system:
            content, system = system + content, ""
        out.append(f"<start_of_turn>{role}\n{content.strip()}<end_of_turn>\n")
    out.append("<start_of_turn>model\n")
    return "".join(out)


def _chatml(messages: list[Message], bos: str) -> str:
    out = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def _llama3(messages: list[Message], bos: str) -> str:
    out = [bos]
    for m in messages:
        out.append(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content'].strip()}<|eot_id|>")
    out.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(out)


def _mistral(messages: list[Message], bos: str) -> str:
    out = [bos]
    system = ""
    for m in messages:
        if m["role"] == "system":
            system += m["content"] + "\n\n"
        elif m["role"] == "user":
            out.append(f"[INST] {system}{m['content'].strip()} [/INST]")
            system = ""
        else:
            out.append(f" {m['content'].strip()}</s>")
    return "".join(out)


def _phi3(messages: list[Message], bos: str) -> str:
    out = [f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages]
    out.append("<|assistant|>\n")
    return "".join(out)


BUILTIN = {"gemma": _gemma, "chatml": _chatml, "llama3": _llama3, "mistral": _mistral, "phi3": _phi3}

# Architecture (general.architecture) -> built-in format, for GGUFs that carry no template.
ARCH_TEMPLATES = {
    "gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "gemma3n": "gemma",
    "qwen": "chatml", "qwen2": "chatml", "qwen2moe": "chatml", "qwen3": "chatml", "qwen3moe": "chatml",
    "llama": "llama3", "mistral": "mistral", "mistral3": "mistral", "phi3": "phi3", "phi2": "chatml",
}


@dataclass(frozen=True)
class ChatTemplate:
    name: str  # "gguf" for the file's own Jinja template, else a built-in name
    source: str  # gguf | architecture | override | fallback
    jinja: str | None = None

    def describe(self) -> str:
        if self.source == "gguf":
            return "the model's own chat template (from the GGUF)"
        if self.source == "architecture":
            return f"built-in '{self.name}' format (the GGUF has no chat template; chosen from its architecture)"
        if self.source == "override":
            return f"'{self.name}' format (chosen in settings)"
        if self.source == "server":  # remote backends template on the server; we never see the template
            return f"the server's own chat template (applied remotely by {self.name})"
        return f"built-in '{self.name}' format (unknown architecture; the GGUF has no chat template)"


def select_template(architecture: str, gguf_template: str | None, override: str | None = None) -> ChatTemplate:
    if override:
        if override in BUILTIN:
            return ChatTemplate(override, "override")
        return ChatTemplate("custom", "override", jinja=override)
    if gguf_template:
        return ChatTemplate("gguf", "gguf", jinja=gguf_template)
    name = ARCH_TEMPLATES.get(architecture)
    if name:
        return ChatTemplate(name, "architecture")
    return ChatTemplate("chatml", "fallback")


MAX_PROMPT_CHARS = 4_000_000  # far beyond any context window; a template producing more is broken
MAX_RENDER_SECONDS = 2.0
_ENV = BoundedSandbox(trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=8)
def _compile(source: str) -> Any:
    # A chat renders the same template at every turn; compiling it costs far more than rendering it.
    return _ENV.from_string(source)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


_SYSTEM_NEEDLE = "<System Needle>"  # minja's probe text: a template that keeps a system message prints it
_PROBE_CHARS = 65_536
_PROBE = [{"role": "system", "content": _SYSTEM_NEEDLE}, {"role": "user", "content": "Hey"}]


@functools.lru_cache(maxsize=8)
def keeps_system_messages(source: str) -> bool:
    """Whether the Jinja template `source` shows a system message (False: it refuses or drops it).
    Call within a render budget; a template that fails otherwise raises as a render would."""
    text = ""
    try:
        for chunk in _compile(source).generate(messages=_PROBE, bos_token="", eos_token="",
                                               add_generation_prompt=False, raise_exception=_raise_exception):
            text += chunk
            if len(text) > _PROBE_CHARS:
                return True  # no real template says this much about two messages: the render's checks decide
    except TemplateError as exc:
        if isinstance(exc, SecurityError):
            raise
        return False  # it refused (raise_exception) or could not handle the system turn
    return _SYSTEM_NEEDLE in text


def tool_format(template: ChatTemplate) -> str:
    """The family whose tool calls `template` writes (app/core/chat/tool_formats.py), "" when it has no tool
    support (built-in formats have none)."""
    if template.jinja is None:
        return ""
    try:
        _compile(template.jinja)
        start_budget(MAX_RENDER_SECONDS)
        support = template_tools.probe(template.jinja)
    except (TemplateError, TypeError, ValueError, OverflowError, RecursionError, SyntaxError, MemoryError):
        return ""  # a template that cannot even be probed renders nothing either: render says why
    finally:
        end_budget()
    return support.fmt.name if support.usable and support.fmt else ""


def fold_system_into_first_user(messages: list[Message]) -> list[Message]:
    """System messages joined onto the user turn that follows them, as llama.cpp does for templates without a
    system role; a system prompt followed by no user turn becomes a user turn of its own."""
    out: list[Message] = []
    pending = ""
    for m in messages:
        if m["role"] == "system":
            pending = f"{pending}\n{m['content']}" if pending else m["content"]
            continue
        if pending:
            if m["role"] == "user":
                m = {**m, "content": pending + (f"\n{m['content']}" if m["content"] else "")}
            else:
                out.append({"role": "user", "content": pending})
            pending = ""
        out.append(m)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def _check(m: Message) -> bool:
    role, content = m.get("role"), m.get("content")
    if role == "tool":
        return isinstance(content, str)
    if role == "assistant" and m.get("tool_calls"):
        return content is None or isinstance(content, str)
    return role in ("system", "user", "assistant") and isinstance(content, str)


def render(template: ChatTemplate, messages: list[Message], bos_token: str = "", eos_token: str = "",
           tools: list[dict[str, Any]] | None = None) -> str:
    """The prompt text for `messages` (and `tools`, the functions the model may call), ending where the
    assistant's reply starts."""
    for m in messages:
        if not _check(m):
            raise ChatTemplateError(f"bad message: {m!r}")
    uses_tools = bool(tools) or any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    if template.jinja is None:
        if uses_tools:
            raise ChatTemplateError(f"the built-in '{template.name}' format has no tool support; tools need a "
                                    "model whose own chat template handles them")
        return BUILTIN[template.name](messages, bos_token)
    try:
        compiled = _compile(template.jinja)  # under its own budget: size, tokens, nodes and time
        start_budget(MAX_RENDER_SECONDS)  # counted inside the sandbox: loops, calls and filters, not just output
        extra: dict[str, Any] = {}
        if uses_tools:
            support = template_tools.probe(template.jinja)
            if not support.usable:
                raise ChatTemplateError("this model's chat template has no tool support (it writes neither "
                                        "the tools nor tool calls)")
            messages = template_tools.prepare(support, messages, tools)
            if tools and support.lists_tools:
                extra["tools"] = tools
        if any(m["role"] == "system" for m in messages) and not keeps_system_messages(template.jinja):
            messages = fold_system_into_first_user(messages)
        chunks: list[str] = []
        size = 0
        deadline = time.thread_time() + MAX_RENDER_SECONDS
        # generate() yields as it goes, so a runaway loop is stopped by size or time, not by the OOM killer.
        for chunk in compiled.generate(
            messages=messages, bos_token=bos_token, eos_token=eos_token,
            add_generation_prompt=True, raise_exception=_raise_exception, **extra,
        ):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_PROMPT_CHARS:
                raise ChatTemplateError("the chat template produced an absurdly long prompt and was stopped")
            if time.thread_time() > deadline:
                raise ChatTemplateError("the chat template took too long to render and was stopped")
        return "".join(chunks)
    except ChatTemplateError:
        raise
    except TemplateTooBig as exc:
        raise ChatTemplateError(f"the chat template was refused: {exc}") from exc
    except SecurityError as exc:
        raise ChatTemplateError(f"the chat template tried something unsafe and was stopped: {exc}") from exc
    except MemoryError:  # past the sandbox's checks, stopped by the engine's address-space limit
        raise ChatTemplateError("the chat template ran out of memory and was stopped") from None
    except (TemplateError, TypeError, ValueError, OverflowError, RecursionError, SyntaxError) as exc:
        # OverflowError: the sandbox's range() limit; RecursionError: a macro that calls itself; SyntaxError:
        # Python's compiler refusing the generated code (more than 20 nested loops).
        raise ChatTemplateError(f"the chat template could not be rendered: {exc}") from exc
    finally:
        end_budget()
