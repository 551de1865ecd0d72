"""A llama-bench JSON reader that checks every row the way a consumer of llama-bench's `-o json` would: the
fields, their types, and that the samples add up. Used by the sweep tests and the remote-backend test."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

LLAMA_BENCH_FIELDS: dict[str, type | tuple[type, ...]] = {
    "build_commit": str, "build_number": int, "cpu_info": str, "gpu_info": str, "backends": str,
    "model_filename": str, "model_type": str, "model_size": int, "model_n_params": int,
    "n_batch": int, "n_ubatch": int, "n_threads": int, "type_k": str, "type_v": str,
    "n_gpu_layers": int, "split_mode": str, "main_gpu": int, "no_kv_offload": bool, "flash_attn": bool,
    "use_mmap": bool, "embeddings": bool, "n_prompt": int, "n_gen": int, "n_depth": int, "test_time": str,
    "avg_ns": int, "stddev_ns": int, "avg_ts": (float, int), "stddev_ts": (float, int),
    "samples_ns": list, "samples_ts": list,
}


def read_llama_bench_json(text: str) -> list[dict[str, Any]]:
    """Parse llama-bench `-o json` output and check every row the way a consumer of it would."""
    rows = json.loads(text)
    if not isinstance(rows, list) or not rows:
        raise ValueError("llama-bench JSON is a non-empty list of rows")
    for i, row in enumerate(rows):
        for name, kind in LLAMA_BENCH_FIELDS.items():
            if name not in row:
                raise ValueError(f"row {i}: missing {name}")
            if isinstance(row[name], bool) and kind is not bool:
                raise ValueError(f"row {i}: {name} is a bool")
            if not isinstance(row[name], kind):
                raise ValueError(f"row {i}: {name} is {type(row[name]).__name__}")
        if (row["n_prompt"] > 0) == (row["n_gen"] > 0):
            raise ValueError(f"row {i}: a llama-bench test is either pp (n_prompt) or tg (n_gen)")
        ns, ts = row["samples_ns"], row["samples_ts"]
        if not ns or len(ns) != len(ts):
            raise ValueError(f"row {i}: samples_ns and samples_ts must pair up")
        n_tok = row["n_prompt"] + row["n_gen"]
        for a, b in zip(ns, ts, strict=False):
            if not math.isclose(b, n_tok / (a / 1e9), rel_tol=1e-6):
                raise ValueError(f"row {i}: samples_ts is not tokens / seconds of samples_ns")
        if abs(row["avg_ns"] - statistics.fmean(ns)) > 1:
            raise ValueError(f"row {i}: avg_ns is not the mean of samples_ns")
        if not math.isclose(row["avg_ts"], statistics.fmean(ts), rel_tol=1e-9):
            raise ValueError(f"row {i}: avg_ts is not the mean of samples_ts")
    return rows
