"""A finished reply's KV cells stay as its slot's prefix cache (as in llama-server): the conversation's next
turn is prefilled only past what the cache holds (`cached_tokens` in usage), an unrelated request takes an
empty slot before it evicts that cache, and when every slot holds a cache the least recently used one goes.
One `roofline serve` with 2 slots on the real default model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from served import Served, open_stream, serve, sse_events

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "Name three colours of the rainbow and say which one you like."}]


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "2048") as s:
        yield s


def chat(served: Served, messages: list[dict[str, str]]) -> Any:
    return served.client().chat.completions.create(model=served.model, messages=messages, max_tokens=8,
                                                   temperature=0)


def unrelated(served: Served, text: str) -> None:
    served.client().completions.create(model=served.model, prompt=text, max_tokens=2, temperature=0)


def follow_up(served: Served, first: Any) -> list[dict[str, str]]:
    return [*QUESTION, {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "Why that one?"}]


def test_a_finished_conversation_is_reused_and_evicted_last(served: Served) -> None:
    first = chat(served, QUESTION)
    n_first = first.usage.prompt_tokens
    kept = served.wait_metric("llamacpp:requests_processing", lambda v: v == 0)
    # the finished reply's cells stay: its prompt and all but its last token
    assert kept["llamacpp:kv_cache_tokens"] >= n_first + first.usage.completion_tokens - 1

    # the other slot: a request whose client leaves (its cells are freed at once, its slot is empty)
    conn, resp = open_stream(served, {"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": True})
    for n, _ in enumerate(sse_events(resp), 1):
        if n >= 3:
            break
    if conn.sock:
        conn.sock.close()
    conn.close()
    served.wait_metric("llamacpp:requests_processing", lambda v: v == 0)
    # an unrelated request takes the empty slot, though the conversation's slot was used longer ago
    unrelated(served, "Bananas are yellow and")

    second = chat(served, follow_up(served, first))
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= n_first, (cached, n_first)  # the whole first prompt (and some of the reply) was reused
    assert second.usage.prompt_tokens > cached

    # both slots hold caches now: the least recently used one (the banana's) is evicted first
    unrelated(served, "Trains run on rails and")
    third = chat(served, follow_up(served, first))
    assert third.usage.prompt_tokens_details.cached_tokens == third.usage.prompt_tokens - 1  # all but the last
    unrelated(served, "Trains run on rails and")  # its own cache again: the conversation's is now the older
    unrelated(served, "Clouds are made of")  # helped by neither: the conversation's cache is evicted
    fourth = chat(served, follow_up(served, first))
    assert fourth.usage.prompt_tokens_details.cached_tokens < n_first
