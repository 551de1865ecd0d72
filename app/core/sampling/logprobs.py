"""Log-probabilities of drawn tokens, and their OpenAI form.

A token's log-probability is the log-softmax of the model's logits row at that token, before the sampler's
penalties, temperature or a grammar's mask (what llama-server and OpenAI report: the model's own belief, not the
truncated distribution it was drawn from). `logprob_entry` turns one into OpenAI's chat `logprobs.content[]`
item; app.server.logprobs_api makes the legacy completions form from those. No llama_cpp, no Qt.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_TOP_LOGPROBS = 20  # OpenAI's limit for top_logprobs


@dataclass(frozen=True)
class TokenLogprob:
    """A drawn token's log-probability and the `top` most likely tokens of its row (id, log-probability)."""

    token: int
    logprob: float
    top: list[tuple[int, float]]


def token_logprob(row: np.ndarray, token: int, n_top: int) -> TokenLogprob:
    """The log-softmax of `row` at `token`, and its `n_top` largest entries, most likely first."""
    x = row.astype(np.float64)
    best = float(x.max())
    log_z = best + math.log(float(np.exp(x - best).sum()))
    top: list[tuple[int, float]] = []
    if n_top > 0:
        n_top = min(n_top, x.size)
        ids = np.argpartition(x, x.size - n_top)[x.size - n_top:]
        ids = ids[np.argsort(-x[ids], kind="stable")]
        top = [(int(i), float(x[i]) - log_z) for i in ids]
    return TokenLogprob(int(token), float(x[token]) - log_z, top)


def _item(piece: bytes, logprob: float) -> dict[str, Any]:
    return {"token": piece.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(piece)}


def logprob_entry(drawn: TokenLogprob, piece: Callable[[int], bytes]) -> dict[str, Any]:
    """OpenAI's chat form: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}.

    `piece(token)` is the token's bytes; a token that is only part of a UTF-8 character reads as U+FFFD in
    "token" while "bytes" keeps its exact bytes (as OpenAI does)."""
    entry = _item(piece(drawn.token), drawn.logprob)
    entry["top_logprobs"] = [_item(piece(t), lp) for t, lp in drawn.top]
    return entry
