"""The sampling settings a reply gets when nobody chose others: one set for the window, `roofline chat`,
the engine protocol and the server.

temperature 0.8, top-k 40, top-p 0.95 and min-p 0.05 are llama.cpp's own defaults (llama-cli, llama-server).
Repeat penalty 1.1 is what the window and `roofline chat` have always used: small models loop without it.
max_tokens 512: long enough for a chat answer of a few paragraphs (128 cut most answers mid-sentence), short
enough that a base model rambling on never runs for minutes on a CPU; the window's settings have always
saved 512, so this is the value users already have.

The OpenAI-compatible server differs on purpose in two places, to answer like llama-server: no repeat
penalty, and a request without max_tokens runs to the end of its slot's context (app.server.openai_api).
"""

from __future__ import annotations

TEMPERATURE = 0.8
TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05
REPEAT_PENALTY = 1.1
MAX_TOKENS = 512
