"""Predicted speed-up of speculative decoding with a draft model, from the two models' per-type costs.

One speculative step: the draft model proposes k tokens one at a time (k of its decode steps), then the target
model checks the pending token and the k drafts in ONE batch and keeps the longest agreeing prefix plus one
token of its own. With a per-token acceptance probability α (each draft token independently agrees with
the target), the expected number of tokens one step yields is the standard

    E(α, k) = (1 − α^(k+1)) / (1 − α)        (k + 1 when α = 1; Leviathan et al. 2023, Chen et al. 2023)

and the speed-up over plain decoding is E · T_target / (k · T_draft + T_verify(k + 1)).

The times come from the per-type speed model (app.core.predict.speed): for each ggml type's weights and for the KV
cache, a step of n tokens costs max(bytes / bandwidth, n × weights / the type's decode rate) — the weights
are read once for the whole batch, the arithmetic is done n times — plus the per-token and per-layer
overheads once. So when decode is memory-bound (a big model, a GPU, a fast-arithmetic CPU) verifying k + 1
tokens costs little more than one token and drafting pays; when it is compute-bound (a small model with a
big vocabulary on a CPU) the batch costs about k + 1 plain steps and drafting can only lose. Batched CPU
matrix products can be faster per token than the decode kernels, so this is, if anything, pessimistic.

The engine runs the draft model on the CPU (app.engine.llama.draft_model), so the draft's time is predicted there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from app.core.gguf.info import GGUFInfo
from app.core.predict.memory import MemoryConfig, gpu_layout
from app.core.predict.speed import Rates, cost_parts, decode_traffic

ACCEPTANCES = (0.5, 0.7, 0.9)  # what the recommender shows when no acceptance has been measured


def expected_tokens(alpha: float, k: float) -> float:
    """Expected tokens one speculative step yields: accepted drafts plus the target's own token."""
    alpha = min(max(alpha, 0.0), 1.0)
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def acceptance_rate(alpha: float, k: float) -> float:
    """Accepted drafts over drafted tokens that a per-token acceptance `alpha` gives at draft length k:
    E[accepted] / k = α(1 − α^k) / ((1 − α) k)."""
    alpha = min(max(alpha, 0.0), 1.0)
    if k <= 0:
        return 0.0
    return 1.0 if alpha >= 1.0 else alpha * (1.0 - alpha ** k) / ((1.0 - alpha) * k)


def acceptance_from_rate(rate: float, k: float) -> float:
    """The per-token acceptance α behind a measured accepted/drafted ratio at mean draft length k (the ratio
    understates α: a step stops drafting at the first disagreement, so later drafts are never even tried)."""
    rate = min(max(rate, 0.0), 1.0)
    if k <= 1:
        return rate
    lo, hi = 0.0, 1.0
    for _ in range(60):  # acceptance_rate rises monotonically in α from 0 to 1
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if acceptance_rate(mid, k) < rate else (lo, mid)
    return (lo + hi) / 2


def step_seconds(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, depth: int, n_tokens: float = 1) -> float:
    """Seconds for one model call evaluating `n_tokens` tokens at `depth` (n_tokens 1: a plain decode step,
    the same time as `speed.predict(...).decode_s_per_token`)."""
    has_gpu = rates.gpu is not None
    on_gpu, output_on_gpu = gpu_layout(info.n_layers, cfg.n_gpu_layers, has_gpu)
    gpu_used = has_gpu and (any(on_gpu) or output_on_gpu)
    parts = cost_parts(info, rates, cfg, depth=depth)
    used = ["cpu"] + (["gpu"] if gpu_used else [])
    if gpu_used and decode_traffic(info, cfg, depth, has_gpu).on("cpu") == 0:
        used = ["gpu"]  # everything on the GPU: the CPU only samples
    devices = {"cpu": rates.cpu} | ({"gpu": rates.gpu} if rates.gpu is not None else {})
    seconds = max(devices[d].t0_s for d in used)
    for d in used:
        p = parts[d]
        seconds += devices[d].t_layer_s * p.layer_count
        seconds += sum(max(m, n_tokens * a) for m, a in zip(p.mem, p.alu, strict=True))
    return seconds


@dataclass(frozen=True)
class SpeculativePrediction:
    draft_length: float  # k: tokens drafted per step (a measured mean need not be whole)
    acceptance: float  # α: per-token probability that a draft agrees with the target
    target_s: float  # one plain decode step of the target
    draft_s: float  # one decode step of the draft (on the CPU)
    verify_s: float  # the target evaluating k + 1 tokens in one batch
    tokens_per_step: float  # E(α, k)
    speedup: float  # plain seconds per token / speculative seconds per token

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _draft_cfg(cfg: MemoryConfig) -> MemoryConfig:
    return replace(cfg, n_gpu_layers=0)  # the engine loads the draft model without GPU layers


def predict_speedup(target: GGUFInfo, draft: GGUFInfo, rates: Rates, acceptance: float, draft_length: float,
                    cfg: MemoryConfig | None = None, depth: int = 256) -> SpeculativePrediction:
    """The predicted decode speed-up of `target` with `draft` proposing `draft_length` tokens a step."""
    cfg = cfg or MemoryConfig()
    k = max(1.0, float(draft_length))
    t_target = step_seconds(target, rates, cfg, depth)
    t_draft = step_seconds(draft, rates, _draft_cfg(cfg), depth)
    t_verify = step_seconds(target, rates, cfg, depth, n_tokens=k + 1)
    tokens = expected_tokens(acceptance, k)
    speedup = tokens * t_target / (k * t_draft + t_verify)
    return SpeculativePrediction(k, min(max(acceptance, 0.0), 1.0), t_target, t_draft, t_verify, tokens, speedup)


def break_even_acceptance(target: GGUFInfo, draft: GGUFInfo, rates: Rates, draft_length: float,
                          cfg: MemoryConfig | None = None, depth: int = 256) -> float | None:
    """The per-token acceptance below which drafting is slower than plain decoding (None: it never pays)."""
    def gain(alpha: float) -> float:
        return predict_speedup(target, draft, rates, alpha, draft_length, cfg, depth).speedup

    if gain(1.0) <= 1.0:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gain(mid) < 1.0 else (lo, mid)
    return hi


def speedup_line(target: GGUFInfo, draft: GGUFInfo, rates: Rates, draft_length: float,
                 cfg: MemoryConfig | None = None, depth: int = 256,
                 acceptances: tuple[float, ...] = ACCEPTANCES) -> str:
    """One line for the recommender: the predicted speed-up at a few acceptances and the break-even one."""
    parts = [f"×{predict_speedup(target, draft, rates, a, draft_length, cfg, depth).speedup:.2f} at "
             f"{100 * a:.0f} %" for a in acceptances]
    even = break_even_acceptance(target, draft, rates, draft_length, cfg, depth)
    tail = (f"it pays above {100 * even:.0f} % per-token acceptance" if even is not None
            else "it cannot pay on this machine at any acceptance: the draft steps and the verify batch cost "
                 "more than the tokens they save")
    return f"predicted decode speed-up (draft {draft_length:g} tokens a step): {', '.join(parts)}; {tail}"
