"""The recorded expositions of vLLM (both generations of names), SGLang, TensorRT-LLM and llama-server, and
Ollama's reply and /api/ps, parse into the same measures of the same workload (tests/data/remote_metrics)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.remote.engines import LLAMA, OLLAMA, SGLANG, SPECS, TRTLLM, VLLM, engine_from_answer, engine_from_names
from app.core.remote.exposition import read_exposition
from app.core.remote.llama_slots import slots_kv
from app.core.remote.measures import measure
from app.core.remote.ollama import ps_measures, reply_measures

DATA = Path(__file__).resolve().parents[2] / "data" / "remote_metrics"
FILES = {"vllm": VLLM, "vllm-v0": VLLM, "sglang": SGLANG, "trtllm": TRTLLM, "llama-server": LLAMA}
# The workload written in the files (tests/helpers/engine_recordings.py): 4 requests in the window
N, PROMPT, CACHED, GENERATED, PREFILL_S, TTFT_S, ITL_S, WINDOW_S = 4, 512, 128, 129, 0.25, 0.3, 0.02, 60.0


def _pair(name: str):
    a = read_exposition((DATA / f"{name}-a.prom").read_text(encoding="utf-8"), 0.0)
    b = read_exposition((DATA / f"{name}-b.prom").read_text(encoding="utf-8"), WINDOW_S)
    return a, b


def _containing(bounds: list[float], value: float) -> tuple[float, float]:
    lower = 0.0
    for le in sorted(bounds):
        if value <= le:
            return lower, le
        lower = le
    return lower, float("inf")


@pytest.mark.parametrize("name", sorted(FILES))
def test_engine_is_told_by_its_prefixes(name):
    _, b = _pair(name)
    assert engine_from_names(b.names()) == FILES[name]


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_engine_gives_the_same_window(name):
    a, b = _pair(name)
    m = measure(SPECS[FILES[name]], b, a)
    assert m.window_s == WINDOW_S
    assert (m.running, m.waiting) == (2, 1)
    assert m.generation_tps_total == pytest.approx(N * GENERATED / WINDOW_S)
    evaluated = PROMPT - CACHED if name == "llama-server" else PROMPT
    assert m.prompt_tps_total == pytest.approx(N * evaluated / WINDOW_S)
    assert m.spec_acceptance == pytest.approx(300 / 400)
    # decode per request: 128 steps of ITL_S; llama-server counts the first token in its predicted tokens and
    # has no count of finished requests to take it off
    steps = GENERATED if name == "llama-server" else GENERATED - 1
    assert m.decode_tps == pytest.approx(steps / ((GENERATED - 1) * ITL_S))
    if name == "llama-server":  # its prompt tokens are those it evaluated (the cached ones are counted apart)
        assert m.prefill_tps == pytest.approx((PROMPT - CACHED) / PREFILL_S)
    elif name != "sglang":  # SGLang has no prefill time: its prefill stays inside TTFT
        assert m.prefill_tps == pytest.approx(PROMPT / PREFILL_S)
    assert m.prefix_hit_rate == pytest.approx(CACHED / PROMPT)
    if name == "llama-server":  # no histograms, no KV gauge (its KV use comes from /slots)
        assert m.ttft is None and m.itl is None and m.kv_fraction is None
        return
    assert m.kv_fraction == pytest.approx(0.25)
    assert m.ttft is not None and m.ttft.count == N
    assert m.ttft.mean_ms == pytest.approx(TTFT_S * 1000)
    bounds = list(b.buckets[SPECS[FILES[name]].ttft[0]])
    lower, upper = _containing(bounds, TTFT_S)
    assert lower * 1000 <= m.ttft.p50_ms <= m.ttft.p99_ms <= upper * 1000  # the 2 slow early ones are outside
    assert m.itl is not None and m.itl.mean_ms == pytest.approx(ITL_S * 1000)
    if name in ("sglang", "trtllm"):
        assert m.kv_tokens == 4096 and m.kv_capacity == 16384
    if name.startswith("vllm") or name == "sglang":
        assert m.preemptions == 1


@pytest.mark.parametrize("name", ["vllm", "vllm-v0", "trtllm"])
def test_prefill_and_decode_time_histograms(name):
    a, b = _pair(name)
    m = measure(SPECS[FILES[name]], b, a)
    assert m.prefill_time is not None and m.prefill_time.mean_ms == pytest.approx(PREFILL_S * 1000)
    assert m.decode_time is not None and m.decode_time.mean_ms == pytest.approx((GENERATED - 1) * ITL_S * 1000)
    assert m.decode_tps_from == "decode time"


def test_without_an_earlier_scrape_the_window_is_the_servers_life():
    _, b = _pair("vllm")
    m = measure(SPECS[VLLM], b)
    assert m.window_s is None
    assert m.ttft is not None and m.ttft.count == N + 2
    assert m.ttft.p99_ms > 2500  # the two 3 s requests of before are in it
    assert m.generation_tps_total is None  # a rate needs a window


def test_vllm_versions_agree():
    new, old = (measure(SPECS[VLLM], *reversed(_pair(n))) for n in ("vllm", "vllm-v0"))
    for field in ("kv_fraction", "prefix_hit_rate", "spec_acceptance", "prefill_tps", "decode_tps", "running"):
        assert getattr(new, field) == pytest.approx(getattr(old, field)), field
    assert new.itl is not None and old.itl is not None and new.itl.mean_ms == pytest.approx(old.itl.mean_ms)


def test_llama_server_slots_give_its_kv_use():
    slots = json.loads((DATA / "llama-server-slots.json").read_text(encoding="utf-8"))
    assert slots_kv(slots) == (512 + 64 + 512 + 129, 16384)
    assert slots_kv([{"id": 0}]) is None and slots_kv({"n_ctx": 5}) is None and slots_kv([]) is None
    assert slots_kv([{"n_ctx": 100, "n_prompt_tokens": 10**9}]) == (100, 100)  # never over the slot's context


def test_ollama_reply_and_ps():
    chat = json.loads((DATA / "ollama-chat.json").read_text(encoding="utf-8"))
    m = reply_measures(chat)
    assert m is not None and m.source == "server: Ollama"
    assert m.prefill_tps == pytest.approx(PROMPT / PREFILL_S)
    assert m.decode_tps == pytest.approx(1 / ITL_S)
    assert m.load_ms == pytest.approx(100.0)
    ps = ps_measures(json.loads((DATA / "ollama-ps.json").read_text(encoding="utf-8")), model="llama3.1:8b")
    assert ps is not None and ps.kv_capacity == 16384 and ps.memory_gpu_bytes == ps.memory_bytes > 0
    version = json.loads((DATA / "ollama-version.json").read_text(encoding="utf-8"))
    assert engine_from_answer("/api/version", version) == OLLAMA
    assert engine_from_answer("/props", version) is None


def test_ollama_screen_shows_its_reply_and_ps_numbers():
    from app.core.remote.text import screen_lines

    reply = reply_measures(json.loads((DATA / "ollama-chat.json").read_text(encoding="utf-8")))
    ps = ps_measures(json.loads((DATA / "ollama-ps.json").read_text(encoding="utf-8")), model="llama3.1:8b")
    assert reply is not None and ps is not None
    reply_text = "\n".join(screen_lines(reply, "host:11434"))
    assert "load     :" in reply_text and "server: Ollama" in reply_text
    assert reply.prefill_tps is not None and f"{reply.prefill_tps:,.0f} tok/s" in reply_text
    ps_text = "\n".join(screen_lines(ps, "host:11434"))
    assert ps.kv_capacity is not None and f"context {ps.kv_capacity:,} tokens" in ps_text
    assert "memory   :" in ps_text and "on the GPU" in ps_text


def test_ollama_chat_summary_names_the_model_memory():
    from app.core.remote.text import summary_line

    ps = ps_measures(json.loads((DATA / "ollama-ps.json").read_text(encoding="utf-8")), model="llama3.1:8b")
    assert ps is not None and ps.memory_bytes
    line = summary_line(ps)
    assert line.startswith("server: Ollama") and f"model {ps.memory_bytes / 2**30:.1f} GiB" in line
    assert "on the GPU" in line
