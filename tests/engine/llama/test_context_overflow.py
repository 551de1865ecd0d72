"""Context overflow policies: the arithmetic on its own, then `roofline chat --ctx 128` on the real default
model: `rolling` shifts the KV cache and goes on past the context, `stop` ends inside it, `truncate-middle`
cuts a too-long prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine import protocol as P
from app.engine.llama.context_overflow import ContextOverflow, context_limit, fit_prompt, middle_cut, shift_amount


def test_middle_cut_keeps_the_start_and_the_newest_tokens() -> None:
    tokens = list(range(100))
    cut, dropped = middle_cut(tokens, 40, n_keep=10)
    assert dropped == 60 and len(cut) == 40
    assert cut[:10] == list(range(10)) and cut[10:] == list(range(70, 100))
    assert middle_cut(tokens, 100, 10) == (tokens, 0)  # fits: untouched
    cut, _ = middle_cut(tokens, 40, n_keep=90)  # a keep too big for the limit is capped at half of it
    assert cut[:20] == list(range(20)) and cut[-1] == 99


def test_a_shift_drops_half_of_what_is_not_kept() -> None:
    assert shift_amount(128, 8) == 60
    assert shift_amount(10, 9) == 1  # always some room


class _FakeLlm:
    """Just what fit_prompt reads on a raw prompt: llama.cpp's padded n_ctx and the bookkeeping size."""

    def __init__(self, n_ctx: int, asked: int) -> None:
        self._n_ctx = n_ctx
        self.input_ids = np.zeros(asked, dtype=np.intc)

    def n_ctx(self) -> int:
        return self._n_ctx


def _raw(policy: str, n: int, keep: int | None = None) -> P.Generate:
    return P.Generate(request_id="r", prompt="x", sampling=P.Sampling(max_tokens=n), context_overflow=policy,
                      n_keep=keep)


def test_the_limit_is_the_context_asked_for_not_llama_cpps_padding() -> None:
    llm: Any = _FakeLlm(256, 128)  # --ctx 128: llama.cpp allocates 256 cells, the bookkeeping holds 128
    assert context_limit(llm) == 128
    tokens, plan = fit_prompt(llm, _raw("rolling", 300, keep=5), list(range(200)), None)
    assert plan.limit == 128 and plan.n_keep == 5
    assert len(tokens) == 128 - 64 and tokens[:5] == [0, 1, 2, 3, 4] and tokens[-1] == 199
    assert plan.prompt_dropped == 200 - 64
    assert plan.max_tokens(300, len(tokens)) == 300  # rolling: the request's own limit
    _, stop = fit_prompt(llm, _raw("stop", 300), list(range(20)), None)
    assert stop.max_tokens(300, 20) == 108  # stop: where the context is full
    assert stop.n_keep == 20  # a raw prompt keeps itself by default


def test_stop_refuses_a_prompt_that_cannot_fit_and_unknown_policies_are_refused() -> None:
    llm: Any = _FakeLlm(256, 128)
    with pytest.raises(ValueError, match="context holds 128"):
        fit_prompt(llm, _raw("stop", 8), list(range(200)), None)
    with pytest.raises(ValueError, match="Unknown context overflow policy"):
        fit_prompt(llm, _raw("roll", 8), list(range(20)), None)


def test_metrics_say_when_and_how_much() -> None:
    plan = ContextOverflow("rolling", 7, 128, prompt_dropped=3)
    plan.shifts += [{"at_token": 120, "dropped": 60}, {"at_token": 181, "dropped": 60}]
    m = plan.metrics()
    assert (m["context_shifts"], m["context_dropped"], m["context_shift_at"]) == (2, 120, [120, 181])
    assert m["context_prompt_dropped"] == 3 and m["context_keep"] == 7


def roofline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "chat", "-t", "2", *args], capture_output=True,
                          text=True, timeout=1200, env=dict(os.environ))


PROMPT = "The history of the old harbour town begins"


@pytest.mark.model
def test_rolling_generates_past_the_context_by_shifting_the_cache(default_model: Path) -> None:
    res = roofline("--raw", "--temp", "0", "--ctx", "128", "-n", "300", "--context-overflow", "rolling",
                   "--json", PROMPT)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    m = out["metrics"]
    assert m["generated_tokens"] == 300 and out["finish_reason"] == "length"
    assert m["prompt_tokens"] + 300 > 128  # really past the context
    assert m["context_shifts"] >= 2 and m["context_dropped"] >= 300 + m["prompt_tokens"] - 128
    assert m["context_reprefilled"] == 0
    # shifted, not re-prefilled: llama.cpp evaluated the prompt once and then one token per step
    assert m["prefill_tokens"] == m["prompt_tokens"] and m["decode_tokens"] == 299
    assert m["kv_cells_used"] <= 128
    assert m["context_keep"] == m["prompt_tokens"]  # the raw prompt itself is never dropped


@pytest.mark.model
def test_stop_ends_inside_the_context_and_says_why(default_model: Path) -> None:
    res = roofline("--raw", "--temp", "0", "--ctx", "128", "-n", "300", "--context-overflow", "stop", PROMPT)
    assert res.returncode == 0, res.stderr
    assert "-- finished: context_full" in res.stdout
    assert "the context is full" in res.stdout and "--context-overflow rolling" in res.stdout


@pytest.mark.model
def test_truncate_middle_cuts_a_prompt_too_long_for_the_context(default_model: Path) -> None:
    long_prompt = "Remember this. " + " ".join(f"item {i}," for i in range(150)) + " and the last item is"
    res = roofline("--raw", "--temp", "0", "--ctx", "128", "-n", "4", "--json", "--keep", "4",
                   "--context-overflow", "truncate-middle", long_prompt)
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout)["metrics"]
    assert m["context_prompt_dropped"] > 0 and m["prompt_tokens"] <= 128 - 4
    assert m["generated_tokens"] >= 1
    refused = roofline("--raw", "--ctx", "128", "-n", "4", long_prompt)  # stop: a clear refusal, no traceback
    assert refused.returncode == 1 and "context holds 128" in refused.stderr
    assert "Traceback" not in refused.stderr
