"""Chat formatting: built-in formats by architecture, GGUF templates in a bounded sandbox."""

from __future__ import annotations

import tracemalloc

import pytest

from app.core.chat.templates import ChatTemplate, ChatTemplateError, render, select_template

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]


def test_gemma_folds_the_system_prompt_into_the_first_user_turn() -> None:
    t = select_template("gemma3", None)
    assert (t.name, t.source) == ("gemma", "architecture")
    text = render(t, CHAT, bos_token="<bos>")
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                    "<start_of_turn>model\nHello!<end_of_turn>\n"
                    "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n")


def test_the_gguf_template_wins_over_the_architecture_and_an_override_wins_over_both() -> None:
    assert select_template("gemma3", "{{ x }}").source == "gguf"
    assert select_template("gemma3", "{{ x }}", override="chatml").name == "chatml"
    assert select_template("nonesuch", None).source == "fallback"
    assert "architecture" in select_template("qwen2", None).describe()


def test_gguf_jinja_templates_render_with_the_usual_variables() -> None:
    jinja = ("{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
             "{% if add_generation_prompt %}[assistant]{% endif %}")
    assert render(ChatTemplate("gguf", "gguf", jinja), CHAT[1:2], bos_token="<s>") == "<s>[user]Hi[assistant]"


@pytest.mark.parametrize("jinja, reason", [
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "unsafe"),
    ("{{ 'a' * 1000000000 }}", "unsafe"),
    ("{{ 2 ** 100000000 }}", "unsafe"),
    ("{{ 'a'.center(1000000000) }}", "unsafe"),
    ("{{ 'a'|center(1000000000) }}", "unsafe"),
    ("{{ 'x'|indent(1000000000) }}", "unsafe"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}", "long"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "could not be rendered"),
    ("{{ raise_exception('no system role') }}", "no system role"),
    ("{% if %}", "could not be rendered"),
])
def test_hostile_or_broken_templates_are_stopped_quickly(jinja: str, reason: str) -> None:
    # "Stopped before doing the work" measured as memory, which does not depend on this machine's speed:
    # each unguarded case would build gigabytes (a 1e9-character string, a 100M-bit integer, 1e11
    # characters of loop output); stopped, rendering stays within a few MB.
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError) as err:
            render(ChatTemplate("gguf", "gguf", jinja), CHAT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reason in str(err.value)
    assert peak < 8 << 20, f"rendering used {peak / 2**20:.1f} MB before it was stopped"


def test_reasonable_uses_of_repetition_still_work() -> None:
    jinja = "{{ '-' * 10 }}{{ [1] * 3 }}{{ 'a'.center(5) }}{{ 2 ** 8 }}"
    assert render(ChatTemplate("gguf", "gguf", jinja), CHAT) == "----------[1, 1, 1]  a  256"


def test_malformed_messages_are_refused() -> None:
    with pytest.raises(ChatTemplateError):
        render(select_template("gemma3", None), [{"role": "wizard", "content": "x"}])


def test_loop_controls_work_and_a_loop_that_only_continues_still_counts_its_steps() -> None:
    skip = "{% for m in messages %}{% if m.role == 'assistant' %}{% continue %}{% endif %}[{{ m.content }}]{% endfor %}"
    assert render(ChatTemplate("gguf", "gguf", skip), CHAT[1:]) == "[Hi][Bye]"
    first = "{% for m in messages %}[{{ m.content }}]{% if loop.index == 1 %}{% break %}{% endif %}{% endfor %}!"
    assert render(ChatTemplate("gguf", "gguf", first), CHAT[1:]) == "[Hi]!"
    spin = "{% for a in range(100000) %}{% for b in range(100000) %}{% continue %}{% endfor %}{% endfor %}"
    with pytest.raises(ChatTemplateError, match="too many steps|longer than"):
        render(ChatTemplate("gguf", "gguf", spin), CHAT)


def test_strftime_now_gives_the_date_and_refuses_a_huge_format() -> None:
    import datetime

    year = render(ChatTemplate("gguf", "gguf", "{{ strftime_now('%Y') }}"), CHAT)
    assert year in {str(datetime.date.today().year), str(datetime.date.today().year - 1)}  # New Year's Eve
    with pytest.raises(ChatTemplateError, match="unsafe"):
        render(ChatTemplate("gguf", "gguf", "{% set f = '%c' * 40000 %}{{ strftime_now(f ~ f) }}"), CHAT)


def test_a_template_that_drops_the_system_message_gets_it_in_the_first_user_turn() -> None:
    drops = "{% for m in messages if m.role != 'system' %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    assert render(ChatTemplate("gguf", "gguf", drops), CHAT) == "<user>Be brief.\nHi<assistant>Hello!<user>Bye"
    keeps = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    assert render(ChatTemplate("gguf", "gguf", keeps), CHAT).startswith("<system>Be brief.<user>Hi")
