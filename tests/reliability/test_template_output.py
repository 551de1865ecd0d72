"""A chat template's output-size budget, checked before a string is built (app/core/chat/template_sizes.py estimates
what each operation would make from its inputs; app/core/chat/template_sandbox.py refuses it past the budget).

The issue's findings: `(('%(a)99999s' * 9090) % {'a': ''})` built 909M characters and was never refused;
`('{0:99999}' * 11111).format('')` 1.1G characters (2.1 GiB) before it was refused; `expandtabs`, `translate` and
`tojson(indent=...)` likewise; a GGUF with five of the `%` expressions took the engine to 4.6 GB. Here each is
refused with the sandbox's one-line error while the memory Python allocated stays small (tracemalloc's peak).
"""

from __future__ import annotations

import json
import pprint
import tracemalloc
from pathlib import Path

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, htmlsafe_json_dumps

from app.core.chat import template_sizes
from app.core.chat.templates import ChatTemplate, ChatTemplateError, render
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from reliability_plugin import record
from synth_gguf import write_synthetic_gguf

MESSAGES = [{"role": "user", "content": "hello"}]
PERCENT = "{% set x = (('%(a)99999s' * 9090) % {'a': ''}) %}"
FOUR_MB = "{% set big = (" + " ~ ".join(["a"] * 40) + ") ~ 'é' %}"  # `a` (a string the `*` check allows) 40 times
HOSTILE = {
    "%-format with a mapping (the issue's)": PERCENT,
    "str.format widths (the issue's)": "{% set x = ('{0:99999}' * 11111).format('') %}",
    "%-format with a tuple": "{% set x = (('%99999s' * 9090) % (('',) * 9090)) %}",
    "%-format widths from the arguments": "{% set x = ('%*s' * 9000) % ((99999, '') * 9000) %}",
    "%-format key with parentheses": "{% set x = (('%(a(b))99999s' * 7000) % {'a(b)': ''}) %}",
    "%-format of bytes": "{% set x = (('%99999s'.encode() * 9090) % (('x'.encode(),) * 9090)) %}",
    "%-format precision": "{% set x = ('%.99999f' * 9090) % ((1.5,) * 9090) %}",
    "format filter": "{% set x = ('%(a)99999s' * 9090) | format(a='') %}",
    "str.format nested widths": "{% set x = ('{0:{1}}' * 11111).format('', 99999) %}",
    "str.format a value repeated": "{% set x = ('{0}' * 30000).format('y' * 99999) %}",
    "str.format_map widths": "{% set x = ('{a:99999}' * 11111).format_map({'a': ''}) %}",
    "str.format !r repeated": "{% set x = ('{0!r}' * 20000).format('\\x00' * 99999) %}",  # 400 000 characters each
    "expandtabs": "{% set x = ('\t' * 99999).expandtabs(99999) %}",
    "translate": "{% set x = ('a' * 99999).translate({97: 'b' * 99999}) %}",
    "translate through maketrans": "{% set x = ('a' * 99999).translate(''.maketrans({'a': 'b' * 99999})) %}",
    "tojson indent": "{% set x = ([[[[1]]]] * 20000) | tojson(indent=99999) %}",
    "tojson indent string": "{% set x = ([1] * 20000) | tojson(indent=' ' * 99999) %}",
    "tojson of escapes": "{% set a = '<' * 99999 %}" + FOUR_MB + "{% set x = big | tojson %}",  # '\\u003c'...
    "wordwrap wrapstring": "{% set x = ('a' * 99999) | wordwrap(1, wrapstring='x' * 99999) %}",
    "urlize rel": "{% set x = ('a.com ' * 16000) | urlize(rel='x' * 99999) %}",
    "escape": "{% set a = '&' * 99999 %}" + FOUR_MB + "{% set x = big | e %}",  # '&amp;'...
    "bytes repeated": "{% set x = 'x'.encode() * 10**9 %}",
    "a list nested past 16 levels, printed": "{% set ns = namespace(l=['y' * 99999]) %}{% for i in range(20) %}"
                                             "{% set ns.l = [ns.l] %}{% endfor %}{{ [ns.l] * 100000 }}",
    "a namespace, printed": "{% set ns = namespace(s='x' * 99999) %}{{ [ns] * 100000 }}",
    "dict items, printed": "{% set d = {'a': 'x' * 99999} %}{{ [d.items()] * 100000 }}",
    "a dict of 1000 long values through wordcount": "{% set x = {}.fromkeys(range(1000), 'y' * 99999) | wordcount %}",
    "the same through center": "{% set x = {}.fromkeys(range(1000), 'y' * 99999) | center(10) %}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_long_output_is_refused_before_it_is_built(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.core.chat.templates.MAX_RENDER_SECONDS", 3600.0)  # sizes decide, not the clock
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError, match="tried something unsafe and was stopped: ") as err:
            render(ChatTemplate("gguf", "gguf", jinja=HOSTILE[name]), MESSAGES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(err.value)
    assert peak < 24 << 20, f"{peak:,} bytes allocated before the refusal"  # each would build 40 MB to 80 GB
    record("hostile inputs refused")


LEGIT = [  # what real templates (and the test suites of transformers' templates) do with the same operations
    "{{ '%-6s|%05.1f|%x|%%|%c' % ('ab', 2.5, 255, 65) }}",
    "{{ '%(name)s is %(n)03d' % {'name': 'x', 'n': 3} }}",
    "{{ '{0:>8}|{1:.3f}|{2!r}|{k}|{3:{4}}'.format('ab', 3.14159, 'q', 'w', 5, k=[1]) }}",
    "{{ '{a}-{b:,}'.format_map({'a': 1, 'b': 1234567}) }}",
    "{{ 'a\\tb\\tc'.expandtabs(4) }}|{{ 'abc'.translate({97: 'xy', 98: none}) }}",
    "{{ 'ab'.center(9, '*') ~ 'x'.zfill(4) ~ 'y'.ljust(3) ~ 'z'.rjust(3) }}",
    "{{ [{'a': 'x<&>\\'', 'b': [1, 2.5, none, true]}] | tojson(indent=2) }}{{ {'k': 'v'} | tojson }}",
    "{{ 'some words here, and more' | wordwrap(7) }}|{{ 'see example.com now' | urlize }}",
    "{{ '<b>\"x\"</b>' | e }}|{{ ('x' * 50) | truncate(20) }}|{{ {'b': [1, 2]} | pprint }}",
    "{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] | trim | center(12) }}{% endfor %}",
    "{{ ('<{0}>' | safe).format('&') }}|{{ ('<%s>' | safe) % '&' }}|{{ ('{0:>9}' | safe).format('<') }}",
]


def transformers_tojson(x: object, ensure_ascii: bool = False, indent: object = None, separators: object = None,
                        sort_keys: bool = False) -> str:
    """`transformers`' own `tojson` for chat templates (plain json.dumps, keys in their order)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@pytest.mark.parametrize("source", LEGIT)
def test_normal_uses_render_as_plain_jinja_does(source: str) -> None:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = transformers_tojson  # the one chat templates are written for, not Jinja's HTML-safe one
    plain = env.from_string(source)
    expected = plain.render(messages=MESSAGES, bos_token="", eos_token="", add_generation_prompt=True)
    assert render(ChatTemplate("gguf", "gguf", jinja=source), MESSAGES) == expected


VALUES = ["", "abc", "a\nb\t\"'\\", "é€😀", "<&>'", 0, 7, -123456789, 2**200, 3.14159, -1e300, 1e-300,
          float("inf"), True, None, [1, "x", [2.5, None]], {"k": "v", "n": [1, 2, {"z": "é"}]}, (1, "a"),
          Namespace(a="x" * 10, b=[1, 2])]
PERCENT_SPECS = [f"%{flag}{width}{precision}{conv}" for flag in ("", "-", "+#0") for width in ("", "7", "*")
                 for precision in ("", ".0", ".3", ".*") for conv in "srdxeEfgc%"]
FORMAT_SPECS = ["", "5", "<10", "^9", "*>7", "0>4", "+", ",", "_", ".2", ".2f", "10.3e", "#x", "#b", "%", ",.2f",
                "c", "g", ">20s", ".3s", "z.1f", "#o", "=+12,"]


def test_the_estimates_are_never_below_what_the_operation_makes() -> None:
    """An estimate below the truth is a way past the budget: each is checked against the real operation."""
    checked = 0
    for value in VALUES:
        for spec in PERCENT_SPECS:
            args = tuple([5] * spec.count("*") + ([] if spec.endswith("%") else [value]))
            for fmt, arg in ((f"x{spec}yy", args), (f"%(k){spec[1:]}", {"k": value})):
                try:
                    out = fmt % arg
                except (TypeError, ValueError, OverflowError, KeyError):
                    continue
                assert template_sizes.percent_size(fmt, arg, 10**9) >= len(out), (fmt, arg)
                checked += 1
        for spec in FORMAT_SPECS:
            try:
                out = format(value, spec)
            except (TypeError, ValueError, OverflowError):
                continue
            assert template_sizes.field_size(value, spec, 10**9) >= len(out), (value, spec)
            checked += 1
        assert template_sizes.repr_size(value, 10**9) >= max(len(repr(value)), len(ascii(value))), value
        assert template_sizes.printed_size(value, 10**9) >= len(str(value)), value
        for indent in (None, 0, 2, "\t"):
            try:  # Jinja's own tojson and the one the sandbox gives templates (transformers')
                outs = [htmlsafe_json_dumps(value, dumps=json.dumps, sort_keys=True, indent=indent),
                        transformers_tojson(value, indent=indent)]
            except (TypeError, ValueError):
                continue
            for out in outs:
                assert template_sizes.tojson_size(value, indent, 10**9) >= len(out), (value, indent)
        assert 2 * template_sizes.tojson_size(value, 1, 10**9) + 16 >= len(pprint.pformat(value)), value
    for s, tab in (("a\tb\t\tc", 4), ("\t" * 5, 8), ("x", 33)):
        assert template_sizes.expandtabs_size(s, tab) >= len(s.expandtabs(tab))
    for s, table in (("abca", {97: "xyz", 98: None}), ("abc", str.maketrans("ab", "xy")), ("abc", ["", "zz"] * 60)):
        assert template_sizes.translate_size(s, table) >= len(s.translate(table))
    shared = [["y" * 10] * 1000] * 50  # one list, printed 50 times
    assert template_sizes.printed_size(shared, 10**9) >= len(str(shared))
    assert checked > 1000


def test_the_clock_is_checked_inside_one_long_format_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.core.chat.templates.MAX_RENDER_SECONDS", 0.0)
    for template, content in (("{{ messages[0]['content'] % {'a': 65} }}", "%(a)c" * 50_000),
                              ("{{ messages[0]['content'].format('x') }}", "{0}" * 50_000)):
        with pytest.raises(ChatTemplateError, match="unsafe and was stopped: the template ran longer than 0 s"):
            render(ChatTemplate("gguf", "gguf", jinja=template), [{"role": "user", "content": content}])
        record("hostile inputs refused")


def _peak_rss(pid: int) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the engine's peak RSS from /proc")
def test_the_engine_refuses_the_issues_gguf_without_growing(tmp_path: Path) -> None:
    template = PERCENT * 5 + "{{ messages[0]['content'] }}"  # took the engine to 4.6 GB
    model = write_synthetic_gguf(tmp_path / "percent.gguf", n_layers=1, chat_template=template)
    with EngineClient() as engine:
        engine.load(P.LoadConfig(model_path=str(model), n_ctx=256, n_threads=1))
        assert engine.pid is not None
        before = _peak_rss(engine.pid)
        with pytest.raises(EngineError) as err:
            list(engine.generate(P.Generate(request_id="pct", messages=MESSAGES, sampling=P.Sampling(max_tokens=2)),
                                 timeout=60))
        e = err.value.error
        assert (e.kind, e.fatal) == ("bad_request", False), e
        assert "\n" not in e.message and "tried something unsafe" in e.message, e.message
        assert engine.alive
        assert _peak_rss(engine.pid) - before < 256 << 20
    record("hostile inputs refused")
