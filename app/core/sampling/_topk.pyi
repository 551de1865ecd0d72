"""Type stub for the C module built from app/core/sampling/_topk.c (optional: app/core/sampling/chain.py
falls back to numpy)."""

from typing import Any

def top_k(row: Any, k: int, /) -> tuple[list[int], list[float]]: ...
