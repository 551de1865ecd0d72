"""Hostile inputs: hub file names that climb out of the models folder, chat templates that reach for Python
internals (directly and from inside a GGUF the engine loads), prompts longer than the context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.core.chat.templates import ChatTemplate, ChatTemplateError, render
from app.core.config import paths
from app.core.hub import downloads
from app.core.hub import listing as hub
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from hubserver import HubServer
from reliability_plugin import record
from synth_gguf import write_synthetic_gguf

# ---------------------------------------------------------------------------------------------- hub names

EVIL_NAMES = ["../evil-Q8_0.gguf", "../../../tmp/evil-Q8_0.gguf", "sub/../../evil-Q8_0.gguf",
              "/tmp/evil-Q8_0.gguf", "..\\evil-Q8_0.gguf", "./../evil-Q8_0.gguf", "sub/./../../evil-Q8_0.gguf"]


@pytest.mark.parametrize("name", EVIL_NAMES)
def test_hub_file_names_that_escape_the_models_dir_are_refused(name: str, hub_server: HubServer,
                                                                 tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    hub_server.state.add_repo("acme/Evil-GGUF", {name: src})
    rv = hub.list_variants("acme/Evil-GGUF")
    planned: list[Any] = []
    for variant in rv.variants:
        with pytest.raises(downloads.UnsafeFilename, match="refusing"):
            planned.append(downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir()))
    assert not planned
    assert hub_server.state.served(name) == 0  # refused before a byte moved
    assert not list(tmp_path.rglob("evil-Q8_0.gguf")) and not Path("/tmp/evil-Q8_0.gguf").exists()
    record("hostile inputs refused")


def test_a_symlink_inside_the_models_dir_cannot_redirect_a_download(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (paths.models_dir() / "acme").symlink_to(outside, target_is_directory=True)
    with pytest.raises(downloads.UnsafeFilename, match="outside the models directory"):
        downloads.destination(paths.models_dir(), "acme/repo", "model-Q8_0.gguf")
    record("hostile inputs refused")


# ---------------------------------------------------------------------------------------------- templates

HOSTILE_TEMPLATES = {
    "mro walk": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "globals via cycler": "{{ cycler.__init__.__globals__.os.system('touch {marker}') }}",
    "globals via joiner": "{{ joiner.__init__.__globals__['os'].system('touch {marker}') }}",
    "mutate messages": "{{ messages.append({'role': 'system', 'content': 'pwned'}) }}{{ messages }}",
    "huge range": "{% for i in range(10**9) %}x{% endfor %}",
    "endless recursion": "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "format string walk": "{{ '{0.__class__.__mro__}'.format(messages) }}{{ ''.__class__ }}",
}
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("name", list(HOSTILE_TEMPLATES))
def test_hostile_chat_templates_raise_chat_template_error(name: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    source = HOSTILE_TEMPLATES[name].replace("{marker}", str(marker))
    with pytest.raises(ChatTemplateError):
        render(ChatTemplate("gguf", "gguf", jinja=source), [dict(m) for m in MESSAGES])
    assert not marker.exists()
    record("hostile inputs refused")


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    client = EngineClient()
    client.start()
    yield client
    client.close()


def _generate(client: EngineClient, req: P.Generate) -> list[Any]:
    return list(client.generate(req, timeout=120))


def test_engine_answers_a_hostile_gguf_template_with_an_error_event(engine: EngineClient, tmp_path: Path) -> None:
    marker = tmp_path / "pwned-by-gguf"
    for i, name in enumerate(("globals via cycler", "mro walk", "huge range")):
        template = HOSTILE_TEMPLATES[name].replace("{marker}", str(marker))
        model = write_synthetic_gguf(tmp_path / f"hostile-{i}.gguf", n_layers=1, chat_template=template)
        loaded = engine.load(P.LoadConfig(model_path=str(model), n_ctx=256, n_threads=1))
        assert (loaded.chat_template_name, loaded.chat_template_source) == ("gguf", "gguf")
        tokens: list[Any] = []
        with pytest.raises(EngineError) as err:
            for event in engine.generate(P.Generate(request_id=f"h{i}", messages=MESSAGES,
                                                    sampling=P.Sampling(max_tokens=4)), timeout=60):
                tokens.append(event)
        assert not tokens  # nothing was generated from the hostile prompt
        e = err.value.error
        assert (e.kind, e.request_id, e.fatal) == ("bad_request", f"h{i}", False), e
        assert "chat template" in e.message
        assert engine.alive and not marker.exists()
        # The same engine still serves this model as raw text (no template involved).
        done = _generate(engine, P.Generate(request_id=f"raw{i}", prompt="ab",
                                            sampling=P.Sampling(temperature=0.0, max_tokens=2, ignore_eos=True)))[-1]
        assert isinstance(done, P.Done) and done.metrics["generated_tokens"] == 2
        record("hostile inputs refused")


# ---------------------------------------------------------------------------------------------- context overflow

N_CTX = 256
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def small_ctx(engine: EngineClient, tmp_path_factory: pytest.TempPathFactory) -> EngineClient:
    model = write_synthetic_gguf(tmp_path_factory.mktemp("ctx") / "ctx.gguf", n_layers=1)
    loaded = engine.load(P.LoadConfig(model_path=str(model), n_ctx=N_CTX, n_threads=1))
    assert loaded.n_ctx == N_CTX
    return engine


def _chat(client: EngineClient, rid: str, messages: list[dict[str, str]]) -> P.Done:
    done = _generate(client, P.Generate(request_id=rid, messages=messages, sampling=P.Sampling(
        temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)))[-1]
    assert isinstance(done, P.Done)
    return done


def test_a_raw_prompt_longer_than_the_context_is_refused_clearly(small_ctx: EngineClient) -> None:
    with pytest.raises(EngineError) as err:
        _generate(small_ctx, P.Generate(request_id="long-raw", prompt="many words " * 200))
    e = err.value.error
    assert (e.kind, e.fatal) == ("bad_request", False)
    assert f"the context holds {N_CTX}" in e.message and "Shorten the prompt" in e.message
    assert small_ctx.alive
    record("hostile inputs refused")


def test_oldest_chat_turns_are_dropped_the_system_prompt_and_last_question_kept(small_ctx: EngineClient) -> None:
    system = {"role": "system", "content": "Be brief."}
    turns: list[dict[str, str]] = []
    for i in range(8):
        turns += [{"role": "user", "content": f"q{i} " + "abc " * 12},
                  {"role": "assistant", "content": f"a{i} " + "xyz " * 6}]
    last = {"role": "user", "content": "final question?"}
    done = _chat(small_ctx, "drop", [system, *turns, last])
    dropped = done.metrics["messages_dropped"]
    assert dropped > 0 and done.finish_reason == "length"
    assert done.metrics["prompt_tokens"] <= N_CTX - MAX_TOKENS
    # Exactly the oldest turns went: sending the history without them gives the very same prompt, and
    # keeping one more of them would not have fitted.
    same = _chat(small_ctx, "same", [system, *turns[dropped:], last])
    assert same.metrics["messages_dropped"] == 0
    assert same.metrics["prompt_tokens"] == done.metrics["prompt_tokens"]
    one_more = _chat(small_ctx, "more", [system, *turns[dropped - 1:], last])
    assert one_more.metrics["messages_dropped"] == 1
    record("hostile inputs refused")


def test_a_single_message_longer_than_the_context_is_refused(small_ctx: EngineClient) -> None:
    with pytest.raises(EngineError) as err:
        _chat(small_ctx, "huge", [{"role": "system", "content": "hi"},
                                  {"role": "user", "content": "word " * 400}])
    e = err.value.error
    assert e.kind == "bad_request" and f"the context holds {N_CTX}" in e.message
    assert "Shorten it" in e.message
    assert small_ctx.alive
    record("hostile inputs refused")


def test_unsafe_file_names_never_reach_the_disk(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for bad in ["..", "a/..", "x\x00y.gguf", "con:evil.gguf", "a/" * 20 + "deep.gguf"]:
        with pytest.raises(downloads.UnsafeFilename):
            downloads.destination(models, "acme/repo", bad)
    assert os.listdir(models) == []
    record("hostile inputs refused")
