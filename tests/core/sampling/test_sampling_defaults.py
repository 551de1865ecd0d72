"""One set of sampling defaults (app.core.sampling.defaults) for the window, `roofline chat`, the engine
protocol and the server."""

from __future__ import annotations

import argparse

from app.commands import chat
from app.core.config.settings import SamplingDefaults
from app.core.sampling import defaults as D
from app.engine import protocol as P
from app.server import openai_api as api

FIELDS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens")
EXPECTED = {"temperature": D.TEMPERATURE, "top_p": D.TOP_P, "top_k": D.TOP_K, "min_p": D.MIN_P,
            "repeat_penalty": D.REPEAT_PENALTY, "max_tokens": D.MAX_TOKENS}


def test_window_settings_and_engine_protocol() -> None:
    window = SamplingDefaults()
    engine = P.Sampling()
    assert {f: getattr(window, f) for f in FIELDS} == EXPECTED
    assert {f: getattr(engine, f) for f in FIELDS} == EXPECTED
    assert D.MAX_TOKENS == 512


def test_command_line(tmp_path, monkeypatch) -> None:
    """Flags left out come from the settings (app.core.predict.load_plan): with no settings file, the shared
    defaults."""
    monkeypatch.setenv("ROOFLINE_HOME", str(tmp_path))
    parser = argparse.ArgumentParser()
    chat.register(parser.add_subparsers())
    args = parser.parse_args(["chat", "hi"])
    plan = chat.plan_from_args(args, None, None)
    got = {f: plan.sampling_kwargs()[f] for f in FIELDS}
    assert got == EXPECTED


def test_server_shares_the_sampler_defaults_and_differs_only_like_llama_server() -> None:
    s = api.parse_request({"prompt": "x"}, chat=False, request_id="r", model_names=("m",)).generate.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (D.TEMPERATURE, D.TOP_P, D.TOP_K, D.MIN_P)
    assert s.repeat_penalty == 1.0 and s.max_tokens == api.UNLIMITED_TOKENS
