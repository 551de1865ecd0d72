"""`roofline serve` without a model: request validation, response shapes, metrics text, start-up refusals."""

from __future__ import annotations

import argparse
import json

import pytest

from app.commands.serve import check_options, register
from app.server import openai_api as api
from app.server.metrics import ServerMetrics

MODELS = ("gemma.gguf",)


def parse(body: dict, chat: bool = True) -> api.ParsedRequest:
    return api.parse_request(body, chat, "r1", MODELS)


def status_of(body: dict | bytes, chat: bool = True) -> int:
    try:
        parse(api.parse_json(body if isinstance(body, bytes) else json.dumps(body).encode()), chat)
    except api.ApiError as exc:
        return exc.status
    return 200


def test_chat_request_maps_every_sampling_field() -> None:
    parsed = parse({"model": "gemma.gguf", "messages": [{"role": "developer", "content": "be brief"},
                                                        {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                    "max_tokens": 7, "temperature": 0.0, "top_p": 0.5, "top_k": 3, "min_p": 0.2, "seed": 42,
                    "stop": "END", "stream": True, "stream_options": {"include_usage": True}})
    g = parsed.generate
    assert g.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    s = g.sampling
    assert ((s.max_tokens, s.temperature, s.top_p, s.top_k, s.min_p, s.seed, s.stop)
            == (7, 0.0, 0.5, 3, 0.2, 42, ["END"]))
    assert parsed.stream and parsed.include_usage and parsed.chat


def test_defaults_are_llama_servers() -> None:
    s = parse({"prompt": "x"}, chat=False).generate.sampling
    assert (s.temperature, s.top_k, s.top_p, s.min_p, s.repeat_penalty) == (0.8, 40, 0.95, 0.05, 1.0)
    assert s.max_tokens == api.UNLIMITED_TOKENS  # until the slot's context ends, as in llama-server
    assert not parse({"prompt": "x", "stream_options": {"include_usage": True}}, chat=False).include_usage


@pytest.mark.parametrize("body", [
    b"{not json", b"[1, 2]", b"\xff\xfe",
    {"messages": []}, {"messages": "hi"}, {"messages": [{"role": "wizard", "content": "x"}]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
    {"messages": [{"role": "user", "content": "x"}], "model": "gpt-4o"},
    {"messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
    {"messages": [{"role": "user", "content": "x"}], "temperature": 3},
    {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
    {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5},
    {"messages": [{"role": "user", "content": "x"}], "top_k": True},
    {"messages": [{"role": "user", "content": "x"}], "stop": [1, 2]},
    {"messages": [{"role": "user", "content": "x"}], "n": 2},
    {"messages": [{"role": "user", "content": "x"}], "stream": "yes"},
    {"messages": [{"role": "user", "content": "x"}], "stream_options": []},
])
def test_bad_chat_requests_are_400(body: dict | bytes) -> None:
    assert status_of(body) == 400


def test_bad_completion_prompts_are_400() -> None:
    assert status_of({"prompt": 5}, chat=False) == 400
    assert status_of({"prompt": ["a", "b"]}, chat=False) == 400
    assert status_of({"prompt": ["one"]}, chat=False) == 200


def test_unknown_model_names_the_served_one() -> None:
    with pytest.raises(api.ApiError) as err:
        parse({"model": "llama-70b", "messages": [{"role": "user", "content": "x"}]})
    body = err.value.body()["error"]
    assert "gemma.gguf" in body["message"] and body["code"] == "model_not_found" and body["param"] == "model"


def test_response_shapes_carry_usage_cached_tokens_and_timings() -> None:
    metrics = {"prompt_tokens": 20, "completion_tokens": 5, "cache_n": 12, "prompt_n": 8, "prompt_ms": 4.0,
               "predicted_n": 5, "predicted_ms": 40.0}
    parsed = parse({"messages": [{"role": "user", "content": "x"}]})
    body = api.completion_body(parsed, "chatcmpl-1", "gemma.gguf", "hello", "stop", metrics)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    assert body["usage"] == {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
                             "prompt_tokens_details": {"cached_tokens": 12}}
    assert set(body["timings"]) == set(api.TIMING_KEYS) and body["timings"]["cache_n"] == 12
    chunk = api.chunk_body(parsed, "chatcmpl-1", "gemma.gguf", 0, "he", role=True)
    assert chunk["choices"][0]["delta"] == {"role": "assistant", "content": "he"}
    assert api.sse("[DONE]") == b"data: [DONE]\n\n"


def test_metrics_text_has_llama_server_names_and_histograms() -> None:
    m = ServerMetrics()
    m.on_stats(running=2, waiting=1, kv_tokens=512, n_ctx=2048, steps=10)
    m.on_done("stop", {"prompt_n": 1234567, "prompt_ms": 1500.0, "predicted_n": 3, "predicted_ms": 30.0,
                       "ttft_ms": 120.0, "itl_ms": [10.0, 30.0]})
    text = m.render()
    values = {line.split(" ")[0]: line.split(" ")[1] for line in text.splitlines() if not line.startswith("#")}
    assert values["llamacpp:prompt_tokens_total"] == "1234567"  # exact, not 1.23457e+06
    assert values["llamacpp:prompt_seconds_total"] == "1.500000"
    assert values["llamacpp:tokens_predicted_total"] == "3"
    assert values["llamacpp:requests_processing"] == "2" and values["llamacpp:requests_deferred"] == "1"
    assert values["llamacpp:kv_cache_usage_ratio"] == "0.250000" and values["llamacpp:kv_cache_tokens"] == "512"
    assert "llamacpp:tokens_predicted_seconds_total" in values
    assert values['llamacpp:time_to_first_token_seconds_bucket{le="0.1"}'] == "0"
    assert values['llamacpp:time_to_first_token_seconds_bucket{le="0.25"}'] == "1"
    assert values['llamacpp:inter_token_latency_seconds_bucket{le="0.01"}'] == "1"  # le is inclusive
    assert values['llamacpp:inter_token_latency_seconds_bucket{le="+Inf"}'] == "2"
    assert values["llamacpp:inter_token_latency_seconds_count"] == "2"


def serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::"])
def test_non_loopback_host_needs_an_api_key(host: str) -> None:
    problem = check_options(serve_args("--host", host), None)
    assert problem and "API key" in problem
    assert check_options(serve_args("--host", host), "k") is None


def test_loopback_needs_no_key_and_bad_sizes_are_refused() -> None:
    assert check_options(serve_args(), None) is None
    assert check_options(serve_args("--host", "localhost"), None) is None
    assert "parallel" in (check_options(serve_args("--parallel", "0"), None) or "")
    assert "per request" in (check_options(serve_args("--ctx", "100", "--parallel", "4"), None) or "")


def test_refusal_is_one_line_without_a_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    env = {**os.environ, "ROOFLINE_HOME": str(tmp_path)}
    env.pop("ROOFLINE_API_KEY", None)
    res = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--host", "0.0.0.0"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "refusing to listen on 0.0.0.0 without an API key" in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def make_sequence(stop: list[str], max_tokens: int = 10):  # type: ignore[no-untyped-def]
    from app.core.sampling.chain import Sampler, SamplerParams
    from app.engine.llama.batch.sequence import Sequence

    return Sequence(request_id="r", prompt=[1, 2, 3], sampler=Sampler(SamplerParams(), 8, 0),
                    max_tokens=max_tokens, requested_max_tokens=max_tokens, stop=stop, ignore_eos=False,
                    t_submit=0.0)


def test_sequence_holds_back_a_possible_stop_string_across_pieces() -> None:
    seq = make_sequence(["</end>"])
    out = [seq.accept(5, False, piece.encode(), now=float(i)) for i, piece in enumerate(["Hi ", "there</", "en"])]
    # the last len("</end>") - 1 characters wait: "</en" could still become "</end>"
    assert "".join(out) == "Hi ther" and seq.finish is None
    assert seq.accept(5, False, b"d> more", now=3.0) == "e" and seq.finish == "stop"
    assert "".join(seq.text_parts) == "Hi there" and seq.pending is None  # a finished reply feeds nothing back
    assert seq.timings()["stopping_word"] == "</end>"  # the Messages API's stop_sequence
    first = make_sequence(["b", "a"])  # the earliest in the text, not the first listed
    first.accept(5, False, b"xaxb", now=0.0)
    assert first.stopping_word == "a" and first.finish == "stop"


def test_sequence_releases_held_text_at_max_tokens_and_never_emits_eos() -> None:
    seq = make_sequence(["STOP"], max_tokens=2)
    assert seq.accept(5, False, b"ab", now=0.0) == ""  # "ab" ends in nothing like "STOP": yet 3 chars are held
    assert seq.accept(6, False, b"ST", now=1.0) == "abST" and seq.finish == "length"
    eos = make_sequence([])
    assert eos.accept(7, True, b"<eos>", now=0.0) == "" and eos.finish == "stop" and eos.generated == 1
    assert eos.stopping_word == ""
    split = make_sequence([])  # a character split across two tokens comes out whole
    assert split.accept(5, False, "é".encode()[:1], now=0.0) == ""
    assert split.accept(5, False, "é".encode()[1:], now=1.0) == "é"


def test_a_model_that_cannot_load_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf at all")
    env = {**os.environ, "ROOFLINE_HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "app.cli", "serve", "-m", str(bogus), "--port", "0"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip().count("\n") == 0 and "bogus.gguf is not a usable GGUF model" in res.stderr


def test_json_nesting_is_bounded_at_400() -> None:
    # `metadata` (informational: never changes a reply) takes any JSON, so it can carry the nesting
    head = b'{"messages": [{"role": "user", "content": "x"}], "metadata": '
    assert status_of(head + b"[[[]]]}") == 200
    ok = head + b"[" * 399 + b"]" * 399 + b"}"  # the object and 399 lists: 400 levels
    assert status_of(ok) == 200
    with pytest.raises(api.ApiError) as too_deep:
        api.parse_json(head + b"[" * 400 + b"]" * 400 + b"}")
    assert too_deep.value.status == 400 and "400 deep" in too_deep.value.message
    with pytest.raises(api.ApiError) as err:
        api.parse_json(b"[" * 100_000 + b"]" * 100_000)  # past the C parser's own recursion limit
    assert err.value.status == 400 and "400 deep" in err.value.message


def test_cache_salt_is_per_key_and_salt_and_bounded() -> None:
    def salt(body: dict, key: str = "") -> str:
        return api.parse_request({"prompt": "x", **body}, False, "r", MODELS, client_key=key).generate.cache_salt

    assert salt({}) == ""  # one shared cache when nobody asks otherwise (and no key)
    assert salt({"cache_salt": "alice"}) != salt({"cache_salt": "bob"}) != ""
    assert salt({"cache_salt": "alice"}, key="k1") != salt({"cache_salt": "alice"}, key="k2")
    assert status_of({"prompt": "x", "cache_salt": 5}, chat=False) == 400
    assert status_of({"prompt": "x", "cache_salt": "s" * 257}, chat=False) == 400
