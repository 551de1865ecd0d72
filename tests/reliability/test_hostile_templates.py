"""Chat templates that spin or allocate without producing output, and the engine's resource limits.

The sandbox counts steps (loop items, calls, filters) and checks sizes before every string-building
operation, so these stop on a step or size budget, never on absolute speed. The engine process that renders
templates runs under address-space and CPU-time limits (Linux), checked here on a real engine and on a child.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core.chat import template_budget
from app.core.chat.templates import ChatTemplate, ChatTemplateError, render
from app.engine import limits
from app.engine import protocol as P
from app.engine.client import EngineClient
from reliability_plugin import record
from synth_gguf import write_synthetic_gguf

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"}, {"role": "user", "content": "again"}]

SPINNING = {  # no output at all: the old 2 s check, made only when output was yielded, never ran
    "silent nested loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "filtered loops": "{% for a in range(100000) %}{% for b in range(100000) if b < 0 %}{% endfor %}{% endfor %}",
    "macro in a loop": "{% macro f() %}{% for i in range(100000) %}{% endfor %}{% endmacro %}"
                       "{% for i in range(100000) %}{% set x = f() %}{% endfor %}",
    "power chain": "{% set x = ((10**64)**64)**64 %}",
    "integer squaring": "{% set ns = namespace(x=10**60) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
                        "{% endfor %}",
}
ALLOCATING = {  # each would build gigabytes (MemoryError or the OOM killer) before yielding a character
    "~ doubling": "{% set ns = namespace(s='x' * 100000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                  "{% endfor %}",
    "+ doubling": "{% set ns = namespace(s='x' * 100000) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                  "{% endfor %}",
    "list + doubling": "{% set ns = namespace(s=[1] * 100000) %}{% for i in range(40) %}"
                       "{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "replace": "{% set x = ('x' * 100000).replace('x', 'x' * 100000) %}",
    "replace filter": "{% set x = ('x' * 100000) | replace('x', 'x' * 100000) %}",
    "join": "{% set x = ('x' * 100000).join(['y' * 100000] * 100000) %}",
    "join filter": "{% set x = (['y' * 100000] * 100000) | join %}",
    "%-format width": "{% set x = '%0999999999d' % 1 %}",
    "%-format star": "{% set x = '%*d' % (999999999, 1) %}",
    "format width": "{% set x = '{:>999999999}'.format(1) %}",
    "format nested width": "{% set x = '{:>{}}'.format(1, 999999999) %}",
    "format filter": "{% set x = '%0999999999d' | format(1) %}",
    "center": "{% set x = 'a'.center(999999999) %}",
    "map in a loop": "{% set x = (['y' * 100000] * 100000) | map('upper') | list %}",
    "sum of lists": "{% set x = ([['a'] * 100000] * 100000) | sum(start=[]) %}",
    "slice": "{% set x = [1] | slice(999999999) | list %}",
    "lipsum": "{% set x = lipsum(999999) %}",
    "a list of one big string, printed": "{{ ['y' * 100000] * 100000 }}",
    "batch of a billion": "{% set x = [1] | batch(999999999, 0) | list %}",
    "a batch filled with a big string, printed": "{{ [1] | batch(100000, 'y' * 100000) | list }}",
    "the same through the string filter": "{% set x = ([1] | batch(100000, 'y' * 100000) | list) | string %}",
    "a list doubled by +": "{% set ns = namespace(l=['y' * 100000]) %}{% for i in range(20) %}"
                           "{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l }}",
}


@pytest.mark.parametrize("name", list(SPINNING) + list(ALLOCATING))
def test_templates_that_spin_or_allocate_silently_are_stopped(name: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    source = {**SPINNING, **ALLOCATING}[name]
    # The wall clock is out of the picture: only the step budget and the size checks may stop these.
    monkeypatch.setattr("app.core.chat.templates.MAX_RENDER_SECONDS", 3600.0)
    with pytest.raises(ChatTemplateError, match="unsafe|could not be rendered|out of memory"):
        render(ChatTemplate("gguf", "gguf", jinja=source), MESSAGES)
    record("hostile inputs refused")


def test_the_step_budget_counts_loop_items(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "{% for a in range(300) %}{% for b in range(1000) %}{% endfor %}{% endfor %}x"
    template = ChatTemplate("gguf", "gguf", jinja=source)
    monkeypatch.setattr("app.core.chat.templates.MAX_RENDER_SECONDS", 3600.0)
    assert render(template, MESSAGES) == "x"  # 300k loop items fit the default budget...
    monkeypatch.setattr(template_budget, "MAX_STEPS", 200_000)
    with pytest.raises(ChatTemplateError, match="too many steps"):
        render(template, MESSAGES)  # ...and a smaller budget stops them


def test_the_wall_clock_is_checked_inside_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.core.chat.templates.MAX_RENDER_SECONDS", 0.0)
    monkeypatch.setattr(template_budget, "MAX_STEPS", 10**12)
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match="ran longer than"):
        render(ChatTemplate("gguf", "gguf", jinja=SPINNING["silent nested loops"]), MESSAGES)
    assert time.monotonic() - t0 < 60  # stopped within the first few checks, not after 10^10 items


LLAMA3 = """{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}
{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}
{{- bos_token }}{%- if system_message is defined %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + system_message | trim + '<|eot_id|>' }}{%- endif %}
{%- for message in loop_messages %}
{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{- raise_exception('roles must alternate') }}
{%- endif %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"""


def test_the_budgets_cost_little_on_a_real_template() -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    messages = [{"role": "system", "content": "Be brief."}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "some words here " * 20} for i in range(40)]
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(LLAMA3)
    ours = ChatTemplate("gguf", "gguf", jinja=LLAMA3)
    kwargs = {"messages": messages, "bos_token": "<s>", "add_generation_prompt": True}
    assert render(ours, messages, bos_token="<s>") == plain.render(**kwargs, raise_exception=None)
    t_plain: list[float] = []
    t_ours: list[float] = []
    for _ in range(100):  # interleaved, so a busy machine slows both alike; medians ignore the odd hiccup
        t0 = time.perf_counter()
        plain.render(**kwargs, raise_exception=None)
        t1 = time.perf_counter()
        render(ours, messages, bos_token="<s>")
        t_plain.append(t1 - t0)
        t_ours.append(time.perf_counter() - t1)
    ratio = statistics.median(t_ours) / statistics.median(t_plain)
    assert ratio < 4, ratio  # measured 1.3-2.4 (render() included), 1.1-1.5 for the sandbox alone


# ---------------------------------------------------------------------------------------------- engine limits

needs_prlimit = pytest.mark.skipif(not limits.supported(), reason="resource limits are applied on Linux only")


def _limit(pid: int, name: str) -> str:
    line = next(ln for ln in Path(f"/proc/{pid}/limits").read_text().splitlines() if ln.startswith(name))
    return line[len(name):].split()[0]


@needs_prlimit
def test_the_engine_runs_under_memory_and_cpu_limits_sized_from_the_model(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layers=2)
    with EngineClient() as engine:
        cfg = P.LoadConfig(model_path=str(model), n_ctx=256, n_threads=1)
        engine.load(cfg)
        assert engine.ready is not None and engine.pid is not None
        if engine.ready.gpu_offload:
            pytest.skip("a GPU backend reserves address space: no RLIMIT_AS there (documented)")
        expected = limits.address_space_for(str(model), cfg)
        deadline = time.monotonic() + 60  # sized on a thread of its own, beside the load
        while _limit(engine.pid, "Max address space") == "unlimited" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(_limit(engine.pid, "Max address space")) == expected >= limits.MIN_BYTES
        done = list(engine.generate(P.Generate(request_id="g", prompt="ab", sampling=P.Sampling(
            max_tokens=2, temperature=0.0, ignore_eos=True)), timeout=120))[-1]
        assert isinstance(done, P.Done)  # a normal load and reply fit comfortably
        cpu = int(_limit(engine.pid, "Max cpu time"))
        assert cpu >= limits.request_cpu_budget()


def test_the_limit_grows_with_the_model(tmp_path: Path) -> None:
    small = write_synthetic_gguf(tmp_path / "s.gguf", n_layers=1)
    cfg = P.LoadConfig(model_path=str(small), n_ctx=256)
    assert limits.address_space_for(str(small), cfg) == limits.MIN_BYTES
    big = tmp_path / "big.gguf"  # not a GGUF: the limit follows its size (a sparse file: no disk used)
    with big.open("wb") as fh:
        fh.truncate(20 << 30)
    assert limits.address_space_for(str(big), cfg) >= 4 * (20 << 30)


@needs_prlimit
def test_a_child_past_its_address_space_limit_gets_memory_error_not_the_oom_killer() -> None:
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys; sys.stdin.readline()\n"
        "try:\n    b = bytearray(3 << 30)\n    print('allocated')\n"
        "except MemoryError:\n    print('MemoryError')\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        limits.set_address_space(child.pid, 1 << 30)
        out, _ = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
    assert out.strip() == "MemoryError" and child.returncode == 0
    record("hostile inputs refused")


@needs_prlimit
def test_a_child_past_its_cpu_budget_is_stopped_and_the_reason_is_said() -> None:
    from app.engine.client import describe_exit

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()\nwhile True: pass"],
                             stdin=subprocess.PIPE, text=True)
    try:
        limits.set_cpu_budget(child.pid, 1)
        child.stdin.write("go\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        code = child.wait(timeout=120)
    finally:
        child.kill()
    assert "CPU-time limit" in describe_exit(code), code
    record("hostile inputs refused")
