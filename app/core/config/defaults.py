"""Defaults and choices that several layers share, each written once: settings, the engine's protocol, the
estimators, the CLI and the window import them from here (the sampling defaults live in
app.core.sampling.defaults)."""

from __future__ import annotations

from typing import Literal, get_args

DEFAULT_N_CTX = 4096  # tokens: a load's context when neither settings, preset nor flag says otherwise
DEFAULT_SERVE_PORT = 8080  # `roofline serve` and the window's Serve switch: what editors and scripts expect

# What happens when a reply does not fit the context (LM Studio's three policies; app.engine.llama.context_overflow)
OverflowPolicy = Literal["stop", "truncate-middle", "rolling"]
CONTEXT_OVERFLOW_POLICIES: tuple[str, ...] = get_args(OverflowPolicy)
# How the window names each policy (Settings and Preset); the CLI and the protocol keep the short names.
CONTEXT_OVERFLOW_LABELS: dict[str, str] = {
    "stop": "stop the reply",
    "truncate-middle": "cut the middle of the prompt",
    "rolling": "roll: forget the oldest tokens and go on",
}
