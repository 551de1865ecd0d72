"""Type stub for the C module built from app/core/_topk.c (optional: app/core/sampling.py falls back to numpy)."""

from typing import Any

def top_k(row: Any, k: int, /) -> tuple[list[int], list[float]]: ...
