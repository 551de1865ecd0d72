"""llama-bench compatible results: rows with llama-bench's JSON field names, and its markdown table.

A pp test has n_gen 0 and a tg test n_prompt 0, each its own row, as llama-bench writes them; rates are
tokens / seconds per repetition, reported as mean ± sample standard deviation.
"""

from __future__ import annotations

import datetime as _dt
import statistics
from typing import Any

from app.core.predict.machine_identity import cpu_name


def test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    name = f"pp{n_prompt}" if n_prompt and not n_gen else f"tg{n_gen}" if n_gen and not n_prompt \
        else f"pp{n_prompt}+tg{n_gen}"
    return f"{name} @ d{n_depth}" if n_depth else name


def bench_row(*, n_prompt: int, n_gen: int, n_depth: int, samples_ns: list[int],
              model_info: dict[str, Any], backend: str = "CPU", gpu_info: str = "",
              build: str = "") -> dict[str, Any]:
    tokens = n_prompt + n_gen
    samples_ts = [tokens / (ns / 1e9) for ns in samples_ns if ns > 0]
    avg_ns = statistics.fmean(samples_ns) if samples_ns else 0.0
    row: dict[str, Any] = {
        "build_commit": build, "build_number": 0,
        "cpu_info": cpu_name(), "gpu_info": gpu_info, "backends": backend,
        "model_filename": model_info.get("model_filename", ""),
        "model_type": model_info.get("model_type", ""),
        "model_size": int(model_info.get("model_size", 0)),
        "model_n_params": int(model_info.get("model_n_params", 0)),
        "n_batch": model_info.get("n_batch", 0), "n_ubatch": model_info.get("n_ubatch", 0),
        "n_threads": model_info.get("n_threads", 0),
        "type_k": model_info.get("type_k", "f16"), "type_v": model_info.get("type_v", "f16"),
        "n_gpu_layers": model_info.get("n_gpu_layers", 0), "split_mode": "layer", "main_gpu": 0,
        "no_kv_offload": False, "flash_attn": bool(model_info.get("flash_attn", False)),
        "use_mmap": bool(model_info.get("use_mmap", False)), "embeddings": False,
        "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": n_depth,
        "test_time": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "avg_ns": int(avg_ns),
        "stddev_ns": int(statistics.stdev(samples_ns)) if len(samples_ns) > 1 else 0,
        "avg_ts": statistics.fmean(samples_ts) if samples_ts else 0.0,
        "stddev_ts": statistics.stdev(samples_ts) if len(samples_ts) > 1 else 0.0,
        "samples_ns": list(samples_ns),
        "samples_ts": samples_ts,
    }
    return row


def markdown_table(rows: list[dict[str, Any]]) -> str:
    head = "| model | size | params | backend | threads | type_k | test | t/s |"
    sep = "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |"
    lines = [head, sep]
    for r in rows:
        size = f"{r['model_size'] / 2**20:.2f} MiB"
        params = f"{r['model_n_params'] / 1e6:.2f} M"
        test = test_name(r["n_prompt"], r["n_gen"], r["n_depth"])
        lines.append(f"| {r['model_type']} | {size} | {params} | {r['backends']} | {r['n_threads']} | "
                     f"{r['type_k']} | {test} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} |")
    return "\n".join(lines)
