"""Real models' own chat templates (tests/data/templates) through the app's sandbox, compared with a plain
Jinja reference rendering of the same messages (the way `transformers` renders them: an immutable sandbox
with trim_blocks/lstrip_blocks, loop controls, and the `raise_exception` / `strftime_now` globals).

Beyond "the same text": where the BOS token goes (once, at the start, or not at all), what the generation
prompt adds, and where each family puts the system prompt (own block, folded into the first or the last user
turn, bare text after BOS), because a mistake there silently changes what the model sees."""

from __future__ import annotations

import datetime
from pathlib import Path

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.core.chat.reasoning import ends_inside_thinking
from app.core.chat.templates import ChatTemplate, render

DATA = Path(__file__).parents[2] / "data" / "templates"

# file -> (bos_token, eos_token, what add_generation_prompt appends)
MODELS = {
    "llama-3": ("<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    "llama-3.2": ("<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    "qwen2.5": ("", "<|im_end|>", "<|im_start|>assistant\n"),
    "qwen3": ("", "<|im_end|>", "<|im_start|>assistant\n"),
    "mistral-7b-v0.3": ("<s>", "</s>", ""),  # the prompt already ends with [/INST]
    "gemma-2": ("<bos>", "<eos>", "<start_of_turn>model\n"),
    "gemma-3": ("<bos>", "<eos>", "<start_of_turn>model\n"),
    "phi-3": ("<s>", "<|endoftext|>", "<|assistant|>\n"),
    "phi-4": ("<|endoftext|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>"),
    "deepseek-r1-distill": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜Assistant｜><think>\n"),
}

SYSTEM = "You answer in one short sentence."
CONVERSATIONS = {
    "user": [{"role": "user", "content": "What is a GGUF file?"}],
    "system+user": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is a GGUF file?"}],
    "multi-turn": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi!"},
                   {"role": "assistant", "content": "Hello. How can I help?"},
                   {"role": "user", "content": "Name a quantization type."}],
}
NO_SYSTEM_ROLE = {"gemma-2"}  # its template refuses a system message outright


def template_text(name: str) -> str:
    return (DATA / f"{name}.jinja").read_text(encoding="utf-8").removesuffix("\n")


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def reference(name: str, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    bos, eos, _ = MODELS[name]
    return env.from_string(template_text(name)).render(messages=messages, bos_token=bos, eos_token=eos,
                                                       add_generation_prompt=add_generation_prompt)


def sandbox(name: str, messages: list[dict[str, str]]) -> str:
    bos, eos, _ = MODELS[name]
    return render(ChatTemplate("gguf", "gguf", jinja=template_text(name)), messages, bos_token=bos, eos_token=eos)


def _cases() -> list[object]:
    out = []
    for name in MODELS:
        for conv in CONVERSATIONS:
            if name in NO_SYSTEM_ROLE and conv != "user":
                continue  # the reference refuses a system message: see test_gemma_2_gets_the_system_prompt_folded
            out.append(pytest.param(name, conv, id=f"{name}-{conv}"))
    return out


@pytest.mark.parametrize(("name", "conv"), _cases())
def test_sandbox_renders_like_the_reference(name: str, conv: str) -> None:
    messages = CONVERSATIONS[conv]
    assert sandbox(name, messages) == reference(name, messages)


@pytest.mark.parametrize("name", list(MODELS))
def test_generation_prompt_is_exactly_the_assistant_header(name: str) -> None:
    messages = CONVERSATIONS["user"]
    full = reference(name, messages, add_generation_prompt=True)
    without = reference(name, messages, add_generation_prompt=False)
    _, eos, header = MODELS[name]
    if name == "phi-3":  # Phi-3 ends a prompt without the generation prompt with its EOS
        without = without.removesuffix(eos)
    assert full == without + header
    assert sandbox(name, messages).endswith(header)  # the engine always asks for the generation prompt


@pytest.mark.parametrize("name", list(MODELS))
def test_bos_is_at_the_start_once_or_not_at_all(name: str) -> None:
    bos, _, _ = MODELS[name]
    text = sandbox(name, CONVERSATIONS["user"])
    if name.startswith(("qwen", "phi")):
        # no BOS in the template: the engine adds the tokenizer's own when the GGUF asks for one
        assert not bos or bos not in text
    else:
        # the engine adds no second BOS when the text starts with it (worker._prompt_tokens)
        assert text.startswith(bos) and text.count(bos) == 1


def test_where_each_family_puts_the_system_prompt() -> None:
    conv = CONVERSATIONS["multi-turn"]
    last_user = "Name a quantization type."
    assert f"<|start_header_id|>system<|end_header_id|>\n\n{SYSTEM}<|eot_id|>" in sandbox("llama-3", conv)
    assert f"<|im_start|>system\n{SYSTEM}<|im_end|>\n" in sandbox("qwen3", conv)
    assert f"<|system|>\n{SYSTEM}<|end|>\n" in sandbox("phi-3", conv)
    assert f"<|im_start|>system<|im_sep|>{SYSTEM}<|im_end|>" in sandbox("phi-4", conv)
    # Gemma 3 folds it into the first user turn; Mistral into the LAST one
    assert f"<start_of_turn>user\n{SYSTEM}\n\nHi!<end_of_turn>" in sandbox("gemma-3", conv)
    mistral = sandbox("mistral-7b-v0.3", conv)
    assert mistral.startswith("<s>[INST] Hi![/INST] Hello. How can I help?</s>")
    assert mistral.endswith(f"[INST] {SYSTEM}\n\n{last_user}[/INST]")
    # DeepSeek-R1 writes it bare, right after BOS
    assert sandbox("deepseek-r1-distill", conv).startswith(f"<｜begin▁of▁sentence｜>{SYSTEM}<｜User｜>Hi!")
    # Qwen2.5 supplies its own when there is none; Qwen3 does not
    assert "You are Qwen, created by Alibaba Cloud." in sandbox("qwen2.5", CONVERSATIONS["user"])
    assert sandbox("qwen3", CONVERSATIONS["user"]).startswith("<|im_start|>user\n")


def test_gemma_2_gets_the_system_prompt_folded_into_the_first_user_turn() -> None:
    # The template itself refuses a system message; llama.cpp and LM Studio fold it into the first user turn
    # (joined by one newline, as llama.cpp's polyfill does), so the app does too.
    with pytest.raises(jinja2.TemplateError, match="System role not supported"):
        reference("gemma-2", CONVERSATIONS["system+user"])
    assert sandbox("gemma-2", CONVERSATIONS["system+user"]) == (
        f"<bos><start_of_turn>user\n{SYSTEM}\nWhat is a GGUF file?<end_of_turn>\n<start_of_turn>model\n")
    folded = [{"role": "user", "content": f"{SYSTEM}\nHi!"}, *CONVERSATIONS["multi-turn"][2:]]
    assert sandbox("gemma-2", CONVERSATIONS["multi-turn"]) == reference("gemma-2", folded)
    # a template that keeps system messages is left alone
    assert SYSTEM + "\nWhat" not in sandbox("llama-3", CONVERSATIONS["system+user"])


def test_llama_3_2_writes_todays_date() -> None:
    today = datetime.datetime.now().strftime("%d %b %Y")
    text = sandbox("llama-3.2", CONVERSATIONS["user"])
    assert f"Today Date: {today}\n" in text or today != datetime.datetime.now().strftime("%d %b %Y")


def test_reasoning_templates_drop_old_thinking_and_open_new_thinking() -> None:
    conv = [{"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "<think>\nadding\n</think>\n\nIt is 4."},
            {"role": "user", "content": "And 3+3?"}]
    for name in ("qwen3", "deepseek-r1-distill"):
        text = sandbox(name, conv)
        assert text == reference(name, conv)
        assert "adding" not in text and "It is 4." in text  # earlier thinking is not sent back
    # DeepSeek-R1's generation prompt opens the thinking: the reply starts inside it
    assert ends_inside_thinking(sandbox("deepseek-r1-distill", conv))
    assert not ends_inside_thinking(sandbox("qwen3", conv))
