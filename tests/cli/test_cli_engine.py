"""The headless CLI on the real default model: `roofline chat` and `roofline bench --json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model


def roofline(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def test_chat_streams_text_and_prints_a_phase_summary(default_model: Path) -> None:
    res = roofline("chat", "--raw", "Once upon a time", "-n", "16", "--temp", "0", "-t", "2")
    assert res.returncode == 0, res.stderr
    text, _, summary = res.stdout.partition("-- finished")
    assert text.strip(), res.stdout
    for label in ("TTFT", "prefill :", "decode  :", "ITL     : p50", "p95", "p99", "KV cache:", "RSS"):
        assert label in summary
    assert "chat template: none" in res.stderr


def test_chat_says_which_template_it_uses(default_model: Path) -> None:
    res = roofline("chat", "Hello", "-n", "4", "--json", "-t", "2")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["metrics"]["chat_template"] == "gemma"
    assert out["metrics"]["generated_tokens"] >= 1
    res = roofline("chat", "Hello", "-n", "2", "-t", "2")
    assert "built-in 'gemma' format" in res.stderr


def test_bench_json_has_llama_bench_rows(default_model: Path) -> None:
    res = roofline("bench", "-p", "32", "-n", "8", "-r", "2", "-t", "2", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [(r["n_prompt"], r["n_gen"]) for r in rows] == [(32, 0), (0, 8)]
    for r in rows:
        for key in ("model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch",
                    "n_threads", "type_k", "type_v", "n_gpu_layers", "flash_attn", "n_prompt", "n_gen",
                    "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns",
                    "samples_ts"):
            assert key in r, key
        assert len(r["samples_ns"]) == len(r["samples_ts"]) == 2
        tokens = r["n_prompt"] + r["n_gen"]
        for ns, ts in zip(r["samples_ns"], r["samples_ts"], strict=False):
            assert ts == pytest.approx(tokens / (ns / 1e9))
        assert r["n_threads"] == 2
        assert 0.9 * default_model.stat().st_size < r["model_size"] <= default_model.stat().st_size


def test_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    res = roofline("chat", "-m", str(tmp_path / "nope.gguf"), "hi")
    assert res.returncode != 0
    assert "model file not found" in res.stderr
    assert "Traceback" not in res.stderr
