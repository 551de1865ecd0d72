"""llama-server's GET /slots (started with --slots) as KV-cache use, the gauge its /metrics no longer has.

Each slot (`server_slot::to_json` in tools/server/server-context.cpp) reports its `n_ctx` and, once it ran a
task, `n_prompt_tokens` and `next_token[0].n_decoded`: the tokens its sequence holds in the KV cache (a
finished slot keeps them for the next prompt's prefix). Their sum over the slots, against the sum of the
slots' contexts, is the cache's use. An answer that is not a list of such objects gives nothing.
"""

from __future__ import annotations

from typing import Any

from app.core.files.untrusted import whole_number

MAX_TOKENS = 1 << 31
MAX_SLOTS = 4096


def slots_kv(body: Any) -> tuple[int, int] | None:
    """(tokens held, capacity) over all slots, or None."""
    if not isinstance(body, list) or not body or len(body) > MAX_SLOTS:
        return None
    used = capacity = 0
    for slot in body:
        if not isinstance(slot, dict):
            return None
        n_ctx = whole_number(slot.get("n_ctx"), MAX_TOKENS)
        if not n_ctx:
            return None
        capacity += n_ctx
        prompt = whole_number(slot.get("n_prompt_tokens"), MAX_TOKENS) or 0
        nxt = slot.get("next_token")
        first = nxt[0] if isinstance(nxt, list) and nxt and isinstance(nxt[0], dict) else {}
        decoded = whole_number(first.get("n_decoded"), MAX_TOKENS) or 0
        used += min(n_ctx, prompt + decoded)
    return used, capacity
