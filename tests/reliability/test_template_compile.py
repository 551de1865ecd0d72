"""A chat template's compile budget (app/core/chat/template_compile.py): size before parsing, tokens while parsing,
nodes after, a wall clock throughout, and the sandbox's rewrite of the tree linear in its size.

The issue's template, `"{{ messages[0]['content'] ~ 'a' }}" * n`, compiled in 3.5 / 8.9 / 30.4 s for n = 8k / 16k
/ 32k (quadratic: every `~` searched the whole tree again) and a 2.2 MB one stalled the engine for 97 s. Work is
compared here by counting the Python lines run (sys.settrace), never by timing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest

from app.core.chat import template_compile
from app.core.chat.template_sandbox import BoundedSandbox
from app.core.chat.templates import ChatTemplate, ChatTemplateError, render
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from reliability_plugin import record
from synth_gguf import write_synthetic_gguf

MESSAGES = [{"role": "user", "content": "hello"}]
ISSUE = "{{ messages[0]['content'] ~ 'a' }}"  # 34 characters, 11 tokens, 7 nodes
NESTED = "{% if x %}{{ messages[0]['content'] ~ 'a' }}{% endif %}"  # each `~` deeper in the tree
TEMPLATES = Path(__file__).parents[1] / "data" / "templates"


def _refusal(source: str) -> str:
    with pytest.raises(ChatTemplateError) as err:
        render(ChatTemplate("gguf", "gguf", jinja=source), MESSAGES)
    message = str(err.value)
    assert "\n" not in message and message.startswith("the chat template was refused: "), message
    record("hostile inputs refused")
    return message


@pytest.fixture(autouse=True)
def no_compile_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizes decide in these tests, not how busy the machine is (the clock's own tests set it back)."""
    monkeypatch.setattr(template_compile, "MAX_COMPILE_SECONDS", 3600.0)


@pytest.fixture
def parser_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times Jinja's parser started, and its code generator."""
    runs = [0, 0]
    parse, generate = jinja2.parser.Parser.parse, jinja2.Environment._generate

    def counted_parse(self: Any) -> Any:
        runs[0] += 1
        return parse(self)

    def counted_generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        runs[1] += 1
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(jinja2.parser.Parser, "parse", counted_parse)
    monkeypatch.setattr(jinja2.Environment, "_generate", counted_generate)
    return runs


def test_a_template_past_the_size_cap_is_refused_before_it_is_parsed(parser_runs: list[int]) -> None:
    source = ISSUE * 65_000  # 2.2 MB: the issue's template that stalled `roofline serve` for 97 s
    assert len(source) > template_compile.MAX_TEMPLATE_CHARS
    assert "2,210,000 characters long" in _refusal(source)
    assert parser_runs == [0, 0]


def test_too_many_tokens_are_refused_while_parsing(parser_runs: list[int]) -> None:
    source = ISSUE * 2_000  # 68 KB, under the size cap; 22 000 tokens
    assert len(source) < template_compile.MAX_TEMPLATE_CHARS
    assert "more than 20,000 tokens" in _refusal(source)
    assert parser_runs == [1, 0]  # the parser started and never finished: no code was generated


def test_too_many_nodes_are_refused_before_code_is_generated(parser_runs: list[int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_compile, "MAX_TEMPLATE_NODES", 1_000)
    assert "more than 1,000 nodes" in _refusal(ISSUE * 200)  # 2 200 tokens, 1 800 nodes after the rewrite
    assert parser_runs == [1, 0]


def test_the_compile_clock_is_checked_while_parsing(parser_runs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_compile, "MAX_COMPILE_SECONDS", 0.0)
    assert "took longer than 0 s to compile" in _refusal(ISSUE * 100)  # 1 100 tokens: checked every 256
    assert parser_runs == [1, 0]


def test_the_compile_clock_is_checked_at_every_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    stages: list[set[str]] = []
    check = template_compile._Budget.check_clock

    def recorded(self: Any) -> None:
        stages.append({f.f_code.co_name for f in _frames()})
        check(self)

    monkeypatch.setattr(template_compile._Budget, "check_clock", recorded)
    BoundedSandbox().from_string(ISSUE * 100)  # 1 100 tokens, 900 nodes: a few checks at every stage
    for stage in ("counted_tokens", "rewrite", "visit", "_compile"):  # lexing and parsing, the rewrite, Jinja's
        assert any(stage in names for names in stages), stage  # code generator, Python's compile()


def _frames() -> list[Any]:
    frame, out = sys._getframe(), []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return out


def _lines_run(work: Callable[[], object]) -> int:
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(before)
    return count


@pytest.mark.parametrize("family", [ISSUE, NESTED], ids=["issue", "nested"])
def test_the_sandbox_rewrite_costs_the_same_per_node_at_any_size(family: str) -> None:
    """The sandbox's own work while parsing (its `_parse` less plain Jinja's) grows like the template: twice the
    template, about twice the lines run. The old rewrite searched the tree again for every `~`: 3-4x here."""
    ours, plain = BoundedSandbox(), jinja2.Environment()

    def own_work(n: int) -> int:
        source = family * n
        return _lines_run(lambda: ours.parse(source)) - _lines_run(lambda: plain.parse(source))

    own_work(10)  # warm up: first-use imports and caches
    small, large = own_work(250), own_work(500)
    assert small > 0
    assert large / small < 2.5, (small, large)


def test_real_templates_are_far_below_the_compile_caps() -> None:
    env = jinja2.Environment()
    for path in sorted(TEMPLATES.glob("*.jinja")):  # real models' templates, up to qwen3's 4 KB
        source = path.read_text(encoding="utf-8")
        tokens = sum(1 for _ in env._tokenize(source, None))
        nodes = sum(1 for _ in env.parse(source).find_all(jinja2.nodes.Node))
        assert len(source) * 16 < template_compile.MAX_TEMPLATE_CHARS, path.name
        assert tokens * 16 < template_compile.MAX_TEMPLATE_TOKENS, (path.name, tokens)
        assert nodes * 16 < template_compile.MAX_TEMPLATE_NODES, (path.name, nodes)


def test_python_refusing_the_generated_code_is_one_clear_line() -> None:
    source = "{% for a in [1] %}" * 21 + "x" + "{% endfor %}" * 21  # Python allows 20 nested blocks
    with pytest.raises(ChatTemplateError, match="could not be rendered: too many statically nested blocks") as err:
        render(ChatTemplate("gguf", "gguf", jinja=source), MESSAGES)
    assert "\n" not in str(err.value)
    record("hostile inputs refused")


def test_the_engine_loads_a_gguf_with_an_oversized_template_and_refuses_it_at_once(tmp_path: Path) -> None:
    """llama-cpp-python compiles every template of a GGUF as it loads, in plain Jinja with no bound: the 2.2 MB
    one held the load for minutes. The engine loads without that (the template starts with a syntax error, so a
    compile at load would fail the load at once), and its own sandbox refuses the template before parsing it."""
    source = "{% if %}" + ISSUE * 65_000
    model = write_synthetic_gguf(tmp_path / "big-template.gguf", n_layers=1, chat_template=source)
    with EngineClient() as engine:
        engine.load(P.LoadConfig(model_path=str(model), n_ctx=256, n_threads=1))
        with pytest.raises(EngineError) as err:
            list(engine.generate(P.Generate(request_id="big", messages=MESSAGES, sampling=P.Sampling(max_tokens=2)),
                                 timeout=60))  # a generous bound on a hang: the refusal takes milliseconds
        e = err.value.error
        assert (e.kind, e.fatal) == ("bad_request", False), e
        assert "\n" not in e.message and "characters long" in e.message, e.message
        assert engine.alive
    record("hostile inputs refused")
